"""Real `manage.py worker` processes and polling, the one home of both for the crash matrix, the benchmarks and
the crash tests (tests/processes.py imports them from here; bench/ never imports from tests/).

A worker is started on this process's database with a short lease, so a killed one is taken over in seconds;
what it inherits of the faults and the sandbox provider's behaviour is only what it is given, never what this
process happens to hold. ``wait_until`` polls a predicate from synchronous code; ``await_until`` from a
coroutine, the blocking predicate on a thread (the ORM's rule).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from deuz_project.database_url import database_url

__all__ = ["LEASE_SECONDS", "REPO_ROOT", "WorkerProcess", "await_until", "child_env", "processes_stop", "wait_until"]

REPO_ROOT = Path(__file__).resolve().parent.parent
#: The lease of the workers started here: a dead worker's run is taken over after this many seconds.
LEASE_SECONDS = 2
#: What a child never inherits from this process: it is given its fault and its provider's mode, or none.
_NOT_INHERITED = {"DEUZ_FAULT", "DEUZ_FAULT_ACTION", "DEUZ_SANDBOX_PAYMENTS"}


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a `manage.py` child: this one's, without faults, with a short lease, and ``extra``."""
    env = {key: value for key, value in os.environ.items() if key not in _NOT_INHERITED}
    env.update({"DJANGO_SETTINGS_MODULE": "deuz_project.settings", "PYTHONUNBUFFERED": "1",
                "DEUZ_LEASE_SECONDS": str(LEASE_SECONDS), "DEUZ_DEMO_DELAY_MS": "0", **extra})
    return env


class WorkerProcess:
    """`manage.py worker` in a child process on this process's database, one leg at a time, its output kept in a
    file of ``log_dir``; ``env`` may name a fault (``DEUZ_FAULT``, ``DEUZ_FAULT_ACTION``)."""

    def __init__(self, name: str, log_dir: Path, **env: str) -> None:
        self.name = name
        self.log = log_dir / f"worker-{name}.log"
        with open(self.log, "wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "worker", "--poll", "0.1", "--concurrency", "1", "--worker-id", name],
                cwd=REPO_ROOT, env=child_env(DATABASE_URL=database_url(), **env), stdout=output,
                stderr=subprocess.STDOUT,
            )

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    @property
    def is_frozen(self) -> bool:
        """Stopped by SIGSTOP (state T in /proc)."""
        try:
            stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] in {"T", "t"}

    def wait_exit(self, timeout: float = 60) -> int:
        return self.process.wait(timeout=timeout)

    def signal(self, number: int) -> None:
        self.process.send_signal(number)

    def stop(self) -> None:
        processes_stop([self.process])


def processes_stop(processes: Iterable[subprocess.Popen | None]) -> None:
    """Ask every live process to end (a frozen one woken first), then wait for each, killing one that lingers."""
    processes = [process for process in processes if process is not None and process.poll() is None]
    for process in processes:
        process.send_signal(signal.SIGCONT)
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until(predicate: Callable[[], Any], *, timeout: float = 60, what: str = "the condition",
               every: float = 0.1) -> Any:
    """Poll ``predicate`` every ``every`` seconds until it answers something true, and return that; raise
    TimeoutError naming ``what`` after ``timeout`` seconds."""
    for _ in _polls(timeout, what):
        value = predicate()
        if value:
            return value
        time.sleep(every)


async def await_until(predicate: Callable[[], Any], *, timeout: float = 60, what: str = "the condition",
                      every: float = 0.1) -> Any:
    """``wait_until`` for a coroutine: the blocking ``predicate`` runs on a thread."""
    from asgiref.sync import sync_to_async

    for _ in _polls(timeout, what):
        value = await sync_to_async(predicate)()
        if value:
            return value
        await asyncio.sleep(every)


def _polls(timeout: float, what: str) -> Iterator[None]:
    """One item per poll until ``timeout`` seconds have passed, then TimeoutError."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        yield
    raise TimeoutError(f"Timed out after {timeout:g} s waiting for {what}.")
