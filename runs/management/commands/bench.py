"""`manage.py bench [--quick] [--database URL ...]`: the benchmarks (bench/), a table against their bars, and
bench/results.json.

The configured database is measured in this process (SQLite twice: the project's synchronous NORMAL and
synchronous FULL); each ``--database`` URL in a child process of its own. The bench runs with DEBUG off, as
a production worker does (DEBUG logs every query, which costs more than some of the writes measured).

With a Redis URL (``--redis``, or REDIS_URL) and a PostgreSQL database among those measured, the fleet parts
(bench.fleet_parts: verdict to motion, live tail, fan-out, throughput) run too, with daphne and worker
processes of their own: verdict to motion on every database, the rest on PostgreSQL.
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
from typing import Any

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
        parser.add_argument("--redis", default=None, metavar="URL",
                            help="Redis for the fleet parts' channel layer (default REDIS_URL).")
        parser.add_argument("--parts", choices=["all", "core", "fleet", "cancel", "takeover"], default="all",
                            help="core: items 1-3 (overhead, growth, resume) in this process; fleet: items 4-6 "
                                 "(verdict to motion, live tail, fan-out, throughput) with real processes; cancel: "
                                 "cancel to stop (daphne and a worker); takeover: a SIGKILLed worker's run to its "
                                 "continuation at a follower (daphne, two workers, Redis); all (default).")
        for name, help_text in (("approvals", "verdicts measured (50; quick 10)"),
                                ("cancels", "running legs cancelled through each door (20; quick 10)"),
                                ("kills", "workers SIGKILLed mid-run in the takeover (20; quick 5)"),
                                ("tail-runs", "runs streaming at once in the live tail (100; quick 20)"),
                                ("fanout-followers", "followers on the one daphne (500; quick 100)"),
                                ("fanout-runs", "runs the fan-out's followers follow (10; quick 5)"),
                                ("throughput-runs", "throughput runs, drained by 1, 2, 4 workers (1000; quick 60)")):
            parser.add_argument(f"--{name}", type=int, default=None, help=help_text.capitalize() + ".")
        parser.add_argument("--child-output", default=None, help=None)  # internal: a child's results file
        parser.add_argument("--with-fleet", action="store_true", help=None)  # internal: the child runs the fleet parts

    def handle(self, *args, quick: bool, database: list[str], steps: int, repeats: int | None, output: str,
               profile: bool, child_output: str | None, redis: str | None, parts: str, with_fleet: bool, **options):
        if steps < 20:
            raise CommandError("--steps must be at least 20 (growth compares the first ten steps with the last ten).")
        repeats = repeats if repeats is not None else (3 if quick else 5)
        if repeats < 1:
            raise CommandError("--repeats must be at least 1.")
        redis = settings.REDIS_URL if redis is None else redis
        sizes = self._sizes(quick, options)
        from bench.machine import cpu_probe_ms, probe_line

        probe_at_start = None if child_output else cpu_probe_ms()
        if child_output:
            fleet = sizes if with_fleet else None
        else:
            fleet = self._fleet_sizes(parts, redis, database, sizes)
        with override_settings(DEBUG=False):
            measured = self._measure(quick=quick, steps=steps, repeats=repeats, profile=profile,
                                     core=parts in ("all", "core"), fleet=fleet, redis=redis or "",
                                     cancels=sizes.cancels if parts in ("all", "cancel") else None,
                                     kills=self._takeover_kills(parts, redis, sizes))
        if child_output:
            Path(child_output).write_text(json.dumps(measured))
            return
        databases = [measured]
        failed = []
        self._child_options = [*(["--redis", redis] if redis else []), "--parts", parts,
                               *(["--with-fleet"] if fleet else []),
                               *[arg for name in self._SIZE_OPTIONS if options.get(name) is not None
                                 for arg in (f"--{name.replace('_', '-')}", str(options[name]))]]
        for url in database:
            try:
                databases.append(self._child(url, quick=quick, steps=steps, repeats=repeats))
            except CommandError as exc:  # keep what was measured; say what was not
                failed.append(str(exc))
        results = {
            "command": "python manage.py bench" + (" --quick" if quick else "")
            + "".join(" --database URL" for _ in database) + (" --redis URL" if fleet else "")
            + (f" --parts {parts}" if parts != "all" else ""),
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {"cpus": os.cpu_count(), "load_average": list(os.getloadavg()), "python": platform.python_version(),
                        "cpu_probe_ms": [probe_at_start, cpu_probe_ms()]},
            "steps": steps,
            "repeats": repeats,
            "databases": databases,
        }
        from bench.report import cancel_table, fleet_table, table, takeover_table

        self.stdout.write("\n".join((table(results) if parts in ("all", "core") else []) + fleet_table(results)
                                    + cancel_table(results) + takeover_table(results)))
        for data in databases:
            if data["side"]:
                self.stdout.write(f"\n{data['label']}: " + "; ".join(data["side"]))
        self.stdout.write("\n" + probe_line(*results["machine"]["cpu_probe_ms"]))
        Path(output).write_text(json.dumps(results, indent=2) + "\n")
        self.stdout.write(f"\nWrote {output}.")
        if failed:
            raise CommandError(" ".join(failed))

    _SIZE_OPTIONS = ("approvals", "cancels", "kills", "tail_runs", "fanout_followers", "fanout_runs",
                     "throughput_runs")

    def _sizes(self, quick: bool, options: dict) -> Any:
        from dataclasses import replace

        from bench.fleet_parts import FULL, QUICK

        given = {name: options[name] for name in self._SIZE_OPTIONS if options.get(name) is not None}
        for name, value in given.items():
            if value < 1:
                raise CommandError(f"--{name.replace('_', '-')} must be at least 1.")
        return replace(QUICK if quick else FULL, **given)

    def _fleet_sizes(self, parts: str, redis: str, database: list[str], sizes: Any) -> Any:
        """The fleet parts' sizes when they run: a Redis URL and a PostgreSQL database among those measured."""
        if parts in ("core", "cancel", "takeover"):
            return None
        has_postgres = connection.vendor == "postgresql" or any(url.startswith(("postgres:", "postgresql:"))
                                                               for url in database)
        if redis and has_postgres:
            return sizes
        if parts == "fleet":
            raise CommandError("The fleet parts need a Redis URL (--redis or REDIS_URL) and a PostgreSQL database "
                               "(the configured one or a --database URL).")
        self.stderr.write("Skipping the fleet parts (verdict to motion, live tail, fan-out, throughput): they need "
                          "a Redis URL (--redis or REDIS_URL) and a PostgreSQL --database URL.")
        return None

    def _takeover_kills(self, parts: str, redis: str, sizes: Any) -> int | None:
        """The takeover's kills when it runs: its follower in daphne hears worker processes' parts through Redis."""
        if parts not in ("all", "takeover"):
            return None
        if redis:
            return sizes.kills
        if parts == "takeover":
            raise CommandError("The takeover needs a Redis URL (--redis or REDIS_URL): its follower in daphne hears "
                               "the worker processes' parts through the Redis channel layer.")
        self.stderr.write("Skipping the takeover: it needs a Redis URL (--redis or REDIS_URL).")
        return None

    def _measure(self, *, quick: bool, steps: int, repeats: int, profile: bool, core: bool = True,
                 fleet: Any = None, redis: str = "", cancels: int | None = None, kills: int | None = None) -> dict:
        self._migrated()
        vendor = connection.vendor
        label = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}.get(vendor, vendor)
        data: dict[str, Any] = {"vendor": vendor, "label": label, "side": []}
        from bench.database_state import dead_rows, dead_rows_warning

        data["dead_rows_at_start"] = dead_rows()
        warning = dead_rows_warning(data["dead_rows_at_start"], database=label)
        if warning:
            self.stderr.write(warning)
        if core:
            data.update(self._measure_core(quick=quick, steps=steps, repeats=repeats, profile=profile, label=label))
        if fleet is not None:
            from bench import fleet_parts

            self.stderr.write(f"Measuring {label} with real processes (daphne, workers)...")
            data["fleet"] = fleet_parts.measure(sizes=fleet, redis_url=redis, progress=self.stderr.write)
            data["side"] += _fleet_side(data["fleet"])
        if cancels is not None:
            from bench import cancel
            from deuz_project.database_url import database_url

            self.stderr.write(f"  cancel to stop, {cancels} running legs cancelled through each door...")
            data["cancel"] = cancel.measure(cancels=cancels, database_url=database_url(), redis_url=redis,
                                            log_dir=Path(tempfile.mkdtemp(prefix="deuz-bench-cancel-")))
        if kills is not None:
            from bench import takeover
            from deuz_project.database_url import database_url

            self.stderr.write(f"  takeover, {kills} workers SIGKILLed mid-run...")
            data["takeover"] = takeover.measure(kills=kills, database_url=database_url(), redis_url=redis,
                                                log_dir=Path(tempfile.mkdtemp(prefix="deuz-bench-takeover-")))
        if warning:
            data["side"].append(warning)
        return data

    def _measure_core(self, *, quick: bool, steps: int, repeats: int, profile: bool, label: str) -> dict:
        from bench import fresh_resume, journal, leg, overhead, storage

        vendor = connection.vendor
        self.stderr.write(f"Measuring {label} ({steps} steps, {repeats} repeats)...")
        rows = [overhead.measure(steps=steps, repeats=repeats)]
        if vendor == "sqlite":
            rows.append(overhead.measure(steps=steps, repeats=repeats, synchronous="FULL"))
        rows.append(overhead.measure(steps=steps, repeats=repeats, direct_saves=False))  # the same sitting's "before"
        data: dict[str, Any] = {"overhead": [row.as_dict() for row in rows]}
        self.stderr.write("  as the worker runs a leg...")
        data["leg"] = leg.measure(steps=steps, repeats=repeats)
        self.stderr.write("  resume from a fresh process...")
        data["resume"] = fresh_resume.measure(steps=steps, repeats=repeats)
        data["load"] = fresh_resume.measure_load(steps=200 if steps < 200 else 1000, repeats=repeats)
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
                str(repeats)] + (["--quick"] if quick else []) + getattr(self, "_child_options", [])
        env = {**os.environ, "DATABASE_URL": url}
        try:
            completed = subprocess.run(argv, cwd=settings.BASE_DIR, env=env, stderr=sys.stderr, stdout=subprocess.PIPE)
            if completed.returncode != 0:
                raise CommandError(f"The bench of the --database URL failed (exit {completed.returncode}).")
            return json.loads(Path(path).read_text())
        finally:
            Path(path).unlink(missing_ok=True)


def _fleet_side(fleet: dict) -> list[str]:
    """Where the fleet parts' time went: each process's CPU seconds during the tail, the fan-out, the throughput."""
    notes = []
    for name in ("tail", "fanout", "throughput"):
        part = fleet.get(name)
        if part:
            cpu = ", ".join(f"{who} {seconds:.1f}" for who, seconds in part["cpu_seconds"].items())
            notes.append(f"{name}: CPU seconds {cpu} in {part['seconds']:.1f} s")
    return notes
