"""`manage.py bench [--quick] [--database URL ...]`: the benchmarks (bench/), a table against their bars, and
bench/results.json.

The configured database is measured in this process (SQLite twice: the project's synchronous NORMAL and
synchronous FULL); each ``--database`` URL in a child process of its own. The bench runs with DEBUG off, as
a production worker does (DEBUG logs every query, which costs more than some of the writes measured).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.test import override_settings

RESULTS = Path(__file__).resolve().parents[3] / "bench" / "results.json"


class Command(BaseCommand):
    help = "Run the benchmarks (bench/): durable overhead per step, resume, storage, journal; print them against the bars."

    def add_arguments(self, parser):
        parser.add_argument("--quick", action="store_true", help="Fewer repeats and smaller side measurements (< 3 min).")
        parser.add_argument("--database", action="append", default=[], metavar="URL",
                            help="Also measure this database (a DATABASE_URL), in a child process; repeatable.")
        parser.add_argument("--steps", type=int, default=200, help="Steps of the measured runs (default 200).")
        parser.add_argument("--repeats", type=int, default=None, help="Repeats of each figure (default 5; quick 3).")
        parser.add_argument("--output", default=str(RESULTS), help=f"Where the JSON goes (default {RESULTS}).")
        parser.add_argument("--profile", action="store_true",
                            help="Also print a pyinstrument profile of one run's saves replayed on this thread.")
        parser.add_argument("--child-output", default=None, help=None)  # internal: a child's results file

    def handle(self, *args, quick: bool, database: list[str], steps: int, repeats: int | None, output: str,
               profile: bool, child_output: str | None, **options):
        if steps < 20:
            raise CommandError("--steps must be at least 20 (growth compares the first ten steps with the last ten).")
        repeats = repeats if repeats is not None else (3 if quick else 5)
        if repeats < 1:
            raise CommandError("--repeats must be at least 1.")
        with override_settings(DEBUG=False):
            measured = self._measure(quick=quick, steps=steps, repeats=repeats, profile=profile)
        if child_output:
            Path(child_output).write_text(json.dumps(measured))
            return
        databases = [measured]
        failed = []
        for url in database:
            try:
                databases.append(self._child(url, quick=quick, steps=steps, repeats=repeats))
            except CommandError as exc:  # keep what was measured; say what was not
                failed.append(str(exc))
        results = {
            "command": "python manage.py bench" + (" --quick" if quick else "")
            + "".join(" --database URL" for _ in database),
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {"cpus": os.cpu_count(), "load_average": list(os.getloadavg()), "python": platform.python_version()},
            "steps": steps,
            "repeats": repeats,
            "databases": databases,
        }
        from bench.report import table

        self.stdout.write("\n".join(table(results)))
        for data in databases:
            self.stdout.write(f"\n{data['label']}: " + "; ".join(data["side"]))
        Path(output).write_text(json.dumps(results, indent=2) + "\n")
        self.stdout.write(f"\nWrote {output}.")
        if failed:
            raise CommandError(" ".join(failed))

    def _measure(self, *, quick: bool, steps: int, repeats: int, profile: bool) -> dict:
        from bench import journal, leg, overhead, resume, storage

        self._migrated()
        vendor = connection.vendor
        label = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}.get(vendor, vendor)
        self.stderr.write(f"Measuring {label} ({steps} steps, {repeats} repeats)...")
        rows = [overhead.measure(steps=steps, repeats=repeats)]
        if vendor == "sqlite":
            rows.append(overhead.measure(steps=steps, repeats=repeats, synchronous="FULL"))
        rows.append(overhead.measure(steps=steps, repeats=repeats, direct_saves=False))  # the same sitting's "before"
        data = {"vendor": vendor, "label": label, "overhead": [row.as_dict() for row in rows]}
        self.stderr.write("  as the worker runs a leg...")
        data["leg"] = leg.measure(steps=steps, repeats=repeats)
        self.stderr.write("  resume from a fresh process...")
        data["resume"] = resume.measure(steps=steps, repeats=repeats)
        data["load"] = resume.measure_load(steps=200 if steps < 200 else 1000, repeats=repeats)
        stored = storage.measure(steps if quick else max(steps, 200))
        parts = 10_000 if quick else 50_000
        appended = journal.measure(parts)
        data["storage"] = {"growth_ratio": stored.growth_ratio, "total_ratio": stored.total_ratio,
                           "total_bytes": stored.total_bytes, "history_bytes": stored.history_bytes}
        data["journal"] = {"parts_per_second": appended.parts_per_second, "bar": appended.bar, "parts": appended.parts}
        data["side"] = [
            f"bytes written at the last step / at step 10: {stored.growth_ratio:.2f}x (bar 1.2x)",
            f"journal appends: {appended.parts_per_second:,.0f} parts/s (bar {appended.bar:,})",
        ]
        if profile:
            from bench.profile import profile_saves

            self.stdout.write(profile_saves(steps))
        return data

    def _migrated(self) -> None:
        """A --database URL may name a new database: migrate it first (the bench's runs are deleted after)."""
        from django.db.migrations.executor import MigrationExecutor

        executor = MigrationExecutor(connection)
        if executor.migration_plan(executor.loader.graph.leaf_nodes()):
            from django.core.management import call_command

            self.stderr.write("Migrating the bench database first...")
            call_command("migrate", interactive=False, verbosity=0)

    def _child(self, url: str, *, quick: bool, steps: int, repeats: int) -> dict:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
            path = handle.name
        argv = [sys.executable, "manage.py", "bench", "--child-output", path, "--steps", str(steps), "--repeats",
                str(repeats)] + (["--quick"] if quick else [])
        env = {**os.environ, "DATABASE_URL": url}
        try:
            completed = subprocess.run(argv, cwd=settings.BASE_DIR, env=env, stderr=sys.stderr, stdout=subprocess.PIPE)
            if completed.returncode != 0:
                raise CommandError(f"The bench of the --database URL failed (exit {completed.returncode}).")
            return json.loads(Path(path).read_text())
        finally:
            Path(path).unlink(missing_ok=True)
