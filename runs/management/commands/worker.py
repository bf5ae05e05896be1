"""`manage.py worker`: a standalone worker process that claims runs by lease and executes them."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from deuz_project.startup import WorkerWarmup, worker_process_startup, worker_warmup_start
from runs.execution.worker import run_worker, worker_id_default


class Command(BaseCommand):
    help = "Claim queued runs (and runs whose lease lapsed) and execute them until stopped."

    def add_arguments(self, parser):
        parser.add_argument("--concurrency", type=int, default=4, help="Legs run at once (default 4).")
        parser.add_argument("--worker-id", default=None, help="Name in leases and logs (default host:pid).")
        parser.add_argument("--poll", type=float, default=0.5, help="Seconds between claim attempts when idle.")

    warmup: WorkerWarmup | None = None

    def execute(self, *args, **options):
        # The first resume's connection and reads warm on the ORM's thread while the system checks run (they
        # import every agent), so a worker restarted after a crash resumes as fast as a warm one (issue 25).
        self.warmup = worker_warmup_start()
        return super().execute(*args, **options)

    def handle(self, *args, concurrency, worker_id, poll, **options):
        if concurrency < 1:
            raise CommandError("--concurrency must be at least 1.")
        if poll <= 0:
            raise CommandError("--poll must be a positive number of seconds.")
        worker_process_startup(self.warmup)  # warm-up done; the checks imported every agent (heap frozen)
        self.stdout.write(f"Worker {worker_id or worker_id_default()} claiming runs (concurrency {concurrency}).")
        run_worker(concurrency=concurrency, worker_id=worker_id, poll_seconds=poll)
