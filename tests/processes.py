"""Processes against the test database: real workers (for crash tests) and waiting on them, the benchmarks'
(bench/child_processes.py, shared with the crash matrix); freezing one outside a transaction, the handles a
process holds on the database, a command whose children all end with the test, and `manage.py serve` on a free
port, the tests'."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

from bench.child_processes import WorkerProcess, wait_until
from tests.environment import REPO_ROOT

__all__ = [
    "Served", "WorkerProcess", "database_handles", "freeze_between_transactions", "run_process_group", "wait_until",
]


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


def run_process_group(args: list[str], *, timeout: float, **options) -> subprocess.CompletedProcess:
    """Run ``args`` to its end, its output captured as text, in a process group of its own that is SIGKILLed
    whatever happens: a command that starts servers and workers (`manage.py load`) leaves none of them behind,
    on the test database, to take the runs of the tests after it when this test fails or times out."""
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, **options)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


class Served:
    """A running `manage.py serve` whose output is read line by line in the background."""

    def __init__(self, *, database: Path, env: dict[str, str]):
        self.database = database
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", "0"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # A shell without job control starts background jobs with SIGINT ignored,
            # and Python keeps it ignored; give the server the SIGINT a terminal would.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.process.stdout:
            self.output.append(line)
            self.lines.put(line)

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                if self.process.poll() is not None and self.lines.empty():
                    break
                continue
            if match := re.search(pattern, line):
                return match
        pytest.fail(f"no line matching {pattern!r}; output:\n{''.join(self.output)}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
