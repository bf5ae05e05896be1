"""Processes against the test database: real workers (for crash tests), waiting on them, and the handles a process
holds on the database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from django.db import connection

from deuz_project.database_url import database_url
from tests.environment import REPO_ROOT


class WorkerProcess:
    """`manage.py worker` in a child process, its output kept in a file."""

    def __init__(self, name: str, log_dir: Path, **env: str) -> None:
        self.name = name
        self.log = log_dir / f"worker-{name}.log"
        environment = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "DJANGO_SETTINGS_MODULE": "deuz_project.settings",
            "DEUZ_LEASE_SECONDS": "2",
            "DEUZ_DEMO_DELAY_MS": "0",
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        with open(self.log, "wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "worker", "--poll", "0.1", "--concurrency", "1", "--worker-id", name],
                cwd=REPO_ROOT, env=environment, stdout=output, stderr=subprocess.STDOUT,
            )

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_exit(self, timeout: float = 60) -> int:
        return self.process.wait(timeout=timeout)

    def signal(self, number: int) -> None:
        self.process.send_signal(number)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def wait_until(predicate: Callable[[], object], *, timeout: float = 60, what: str = "the condition") -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"Timed out after {timeout} s waiting for {what}.")


def database_handles(pid: int | None = None) -> int:
    """The test database's connections on PostgreSQL (every process's; with ``pid``, all but this test's own), or on
    SQLite the handles on its file of process ``pid`` (this process by default)."""
    if connection.vendor == "postgresql":
        others = "" if pid is None else " AND pid <> pg_backend_pid()"
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database(){others}")
            return cursor.fetchone()[0]
    name = os.path.realpath(connection.settings_dict["NAME"])
    handles = 0
    for fd in Path(f"/proc/{pid or 'self'}/fd").iterdir():
        try:
            handles += os.readlink(fd) == name
        except OSError:  # closed while listed
            pass
    return handles


def _write_locked(run_id: str) -> bool:
    """Whether another process holds a write lock this test would wait on (the run's row, or SQLite's file)."""
    from django.db import OperationalError, transaction

    if connection.vendor == "sqlite":
        import sqlite3

        probe = sqlite3.connect(connection.settings_dict["NAME"], timeout=0.1)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.rollback()
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            probe.close()
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1 FROM runs_run WHERE run_id = %s FOR UPDATE NOWAIT", [run_id])
        return False
    except OperationalError:
        return True


def freeze_between_transactions(worker: WorkerProcess, run_id: str, attempts: int = 100) -> None:
    """SIGSTOP the worker at a moment it holds no lock, as a process paused by the OS or a GC usually does.
    (A process frozen inside a transaction is PostgreSQL's idle_in_transaction_session_timeout's business.)"""
    for _ in range(attempts):
        worker.signal(signal.SIGSTOP)
        time.sleep(0.05)
        if not _write_locked(run_id):
            return
        worker.signal(signal.SIGCONT)
        time.sleep(0.03)
    raise AssertionError("Could not freeze the worker outside a transaction.")
