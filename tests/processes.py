"""Real worker processes against the test database, for crash tests: the worker and the polling are the
benchmarks' (bench/child_processes.py, shared with the crash matrix); freezing one outside a transaction is
the tests'."""

from __future__ import annotations

import signal
import time

from django.db import connection

from bench.child_processes import WorkerProcess, wait_until

__all__ = ["WorkerProcess", "freeze_between_transactions", "wait_until"]


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
