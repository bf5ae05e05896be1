"""`manage.py load`: load with faults on PostgreSQL and Redis (bench/load_harness.py), or a soak with memory samples."""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from bench.load_harness import LoadConfig, load_run, soak_verdict


def _mib(value: int) -> str:
    return f"{value / 2**20:.0f} MiB"


class Command(BaseCommand):
    help = ("Load with faults: runs of the demo agents across worker processes and one daphne, followers on their "
            "streams, while a chaos loop SIGKILLs a worker every few seconds; then checks that nothing was lost or "
            "repeated. Needs PostgreSQL (DATABASE_URL) and Redis (REDIS_URL).")

    def add_arguments(self, parser):
        parser.add_argument("--runs", type=int, default=200, help="Concurrent runs (200).")
        parser.add_argument("--followers", type=int, default=100, help="Runs followed, half SSE, half WebSocket (100).")
        parser.add_argument("--workers", type=int, default=2, help="Worker processes (2).")
        parser.add_argument("--concurrency", type=int, default=16, help="Legs per worker at once (16).")
        parser.add_argument("--kill-every", type=float, default=5.0, help="Seconds between SIGKILLs; 0 for none (5).")
        parser.add_argument("--timeout", type=float, default=900.0, help="Give up after this many seconds (900).")
        parser.add_argument("--soak", type=float, default=0.0, metavar="SECONDS",
                            help="Keep a steady load this long, sampling memory (e.g. 3600).")
        parser.add_argument("--logs", help="Folder for the processes' logs (default: a new temporary folder).")

    def handle(self, *args, **options):
        for name in ("runs", "workers", "concurrency"):
            if options[name] < 1:
                raise CommandError(f"--{name} must be at least 1.")
        if options["followers"] < 0 or options["followers"] > options["runs"]:
            raise CommandError("--followers must be between 0 and --runs.")
        if connection.vendor != "postgresql":
            raise CommandError(f"The load test needs PostgreSQL (DATABASE_URL); this database is {connection.vendor}.")
        if not settings.REDIS_URL:
            raise CommandError("The load test needs Redis for the Channels layer (REDIS_URL).")
        params = connection.settings_dict
        password = f":{params['PASSWORD']}" if params.get("PASSWORD") else ""
        config = LoadConfig(
            runs=options["runs"], followers=options["followers"], workers=options["workers"],
            concurrency=options["concurrency"], kill_every=options["kill_every"], timeout=options["timeout"],
            soak_seconds=options["soak"], redis_url=settings.REDIS_URL,
            database_url=f"postgres://{params['USER']}{password}@{params['HOST'] or '127.0.0.1'}:"
                         f"{params['PORT'] or 5432}/{params['NAME']}",
        )
        log_dir = Path(options["logs"] or tempfile.mkdtemp(prefix="deuz-load-"))
        log_dir.mkdir(parents=True, exist_ok=True)
        report = load_run(config, log_dir=log_dir, progress=self.stdout.write)
        out = self.stdout.write
        out("")
        out(f"Runs started        {report.runs_started}")
        out(f"Runs by status      {', '.join(f'{k} {v}' for k, v in report.statuses.items())}")
        out(f"Parts delivered     {report.parts_delivered} to {report.followers_complete}/{config.followers} "
            "followers that saw their run finish")
        out(f"Lost at followers   {report.lost_at_followers}")
        out(f"Repeated at followers {report.repeated_at_followers} {report.repeats_by_transport or ''}")
        out(f"Journal gaps        {report.journal_gaps} runs")
        out(f"Stream error parts  {sum(report.stream_errors.values())} {report.stream_errors or ''} "
            "(each followed by a reconnect from the cursor)")
        out(f"Payments            {report.payments}, duplicate effects {report.duplicate_effects}")
        out(f"Kills               {report.kills}, recovery legs {report.recoveries}, "
            f"max recovery {report.max_recovery_seconds:.2f} s (lease {config.lease_seconds} s)")
        out(f"Took                {report.seconds:.0f} s")
        out("")
        out(f"{'PROCESS':<12} {'PEAK MEMORY':>12} {'PEAK DB CONNECTIONS':>20}" + ("  SOAK" if config.soak_seconds else ""))
        for name, stats in sorted(report.processes.items()):
            soak = f"  {soak_verdict(stats.samples)}" if config.soak_seconds else ""
            out(f"{name:<12} {_mib(stats.peak_rss):>12} {stats.peak_connections:>20}{soak}")
        if not report.is_clean:
            raise CommandError("The load test found lost, repeated or unfinished work (see above).")
        out("")
        out("Clean: every run finished; nothing lost, repeated or paid twice.")
