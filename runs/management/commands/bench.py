"""`manage.py bench [--quick]`: the benchmarks, printing what they measured and the ratios against the bars."""

from __future__ import annotations

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the benchmarks (bench/) and print measured ratios against their bars."

    def add_arguments(self, parser):
        parser.add_argument("--quick", action="store_true", help="Smaller sizes, for a smoke run.")

    def handle(self, *args, quick: bool, **options):
        from bench import journal, storage

        steps = 40 if quick else 200
        self.stdout.write(f"Checkpoint storage, a {steps}-step tool loop:")
        result = storage.measure(steps)
        self._line("bytes written at the last step / at step 10", result.growth_ratio, 1.2,
                   f"{result.last_step_bytes} B / {result.step_10_bytes} B")
        self._line("all stored bytes / final history", result.total_ratio, 2.0,
                   f"{result.total_bytes} B / {result.history_bytes} B")
        self.stdout.write(
            f"  (a store rewriting the whole history at every save would hold {result.rewrite_everything_bytes} B, "
            f"{result.rewrite_everything_bytes / result.total_bytes:.0f}x more)"
        )
        parts = 10_000 if quick else 50_000
        self.stdout.write(f"Journal appends, {parts} parts in writer-sized batches (1000):")
        appended = journal.measure(parts)
        self._line_at_least(
            f"parts per second on {appended.vendor}", appended.parts_per_second, appended.bar,
            f"{appended.parts} parts in {appended.seconds:.2f} s",
        )

    def _line_at_least(self, what: str, value: float, bar: float, detail: str) -> None:
        verdict = "ok" if value >= bar else "UNDER THE BAR"
        self.stdout.write(f"  {what}: {value:,.0f} (bar {bar:,.0f}; {value / bar:.2f}x) [{verdict}]  {detail}")

    def _line(self, what: str, ratio: float, bar: float, detail: str) -> None:
        verdict = "ok" if ratio <= bar else "OVER THE BAR"
        self.stdout.write(f"  {what}: {ratio:.2f}x (bar {bar}x) [{verdict}]  {detail}")
