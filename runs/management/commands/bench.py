"""`manage.py bench [--quick]`: the benchmarks, printing what they measured and the ratios against the bars."""

from __future__ import annotations

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the benchmarks (bench/) and print measured ratios against their bars."

    def add_arguments(self, parser):
        parser.add_argument("--quick", action="store_true", help="Smaller sizes, for a smoke run.")

    def handle(self, *args, quick: bool, **options):
        from bench import storage

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

    def _line(self, what: str, ratio: float, bar: float, detail: str) -> None:
        verdict = "ok" if ratio <= bar else "OVER THE BAR"
        self.stdout.write(f"  {what}: {ratio:.2f}x (bar {bar}x) [{verdict}]  {detail}")
