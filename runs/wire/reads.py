"""The followers' database reads: a few threads shared by every follower of this process (issue 12).

Under daphne each request's synchronous calls run in a thread of its own, and each such thread keeps its own
database connection, so 70 open streams once held 70 PostgreSQL connections and starved the API. Followers
instead read through these threads: at most ``DEUZ_FOLLOWER_DATABASE_THREADS`` connections (default 4) for
any number of followers. A thread keeps its connection while reads queue up, and closes it as soon as it runs
out of work, so a quiet process holds none, and an SQLite file handle is never left behind a gone follower.

Followers of one run ask the same questions at the same moments (where the run stands, its journal after the
same seq: when they connect together, and when its leg ends and each must hear the end from the database), so a
read still waiting for a thread is shared (``run_shared``): 500 followers of 10 runs asked 1,000 reads at each
leg's end and waited 300 ms for them (issue 25's fan-out); they now ask about 20. A read that has started is
never joined: a caller may need what was written after it began.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from django.conf import settings
from django.db import connections

__all__ = ["DEFAULT_THREADS", "FollowerReads", "close_connections", "follower_reads"]

T = TypeVar("T")

DEFAULT_THREADS = 4


def close_connections() -> None:
    """Close this thread's database connections, except one inside a transaction (a test's, or a caller's
    ``atomic``), which must stay open to commit or roll back."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


class _Job:
    """One read, and the futures of every caller waiting for its answer (one, unless it is shared)."""

    __slots__ = ("args", "context", "function", "futures", "key")

    def __init__(self, function: Callable[..., Any], args: tuple, key: tuple | None) -> None:
        self.function, self.args, self.key = function, args, key
        self.context = contextvars.copy_context()
        self.futures: list[Future] = [Future()]


class FollowerReads:
    """``size`` threads that run blocking reads for async code, each closing its connection when idle."""

    def __init__(self, *, size: int) -> None:
        if size < 1:
            raise ValueError("A FollowerReads needs at least one thread.")
        self.size = size
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._waiting: dict[tuple, _Job] = {}  # shared reads not started yet, by (function, args)

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` on one of the threads; a cancelled caller's read is skipped if not yet started."""
        return await asyncio.wrap_future(self.submit(function, *args))

    async def run_shared(self, function: Callable[..., T], *args: Any) -> T:
        """``run``, but joining the same read (``function`` and hashable ``args``) when one still waits for a
        thread: its answer is every joiner's, so it must be one no caller changes."""
        return await asyncio.wrap_future(self.submit(function, *args, shared=True))

    def submit(self, function: Callable[..., T], *args: Any, shared: bool = False) -> Future[T]:
        self._start_threads()
        key = (function, args) if shared else None
        with self._lock:
            job = self._waiting.get(key) if key is not None else None
            if job is not None:
                future: Future[T] = Future()
                job.futures.append(future)
                return future
            job = _Job(function, args, key)
            if key is not None:
                self._waiting[key] = job
        self._jobs.put(job)
        return job.futures[0]

    def _start_threads(self) -> None:
        if len(self._threads) == self.size:
            return
        with self._lock:
            while len(self._threads) < self.size:
                thread = threading.Thread(target=self._work, name=f"deuz-follower-reads-{len(self._threads)}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                close_connections()  # out of work: hold no connection (and no file handle) while waiting
                job = self._jobs.get()
            if job.key is not None:
                with self._lock:  # started: no caller joins it from now on
                    if self._waiting.get(job.key) is job:
                        del self._waiting[job.key]
            futures = [future for future in job.futures if future.set_running_or_notify_cancel()]
            if not futures:  # every caller was cancelled before it started
                continue
            try:
                result = job.context.run(job.function, *job.args)
            except BaseException as exc:
                close_connections()  # a failed read may have broken its connection; the next one opens afresh
                for future in futures:
                    future.set_exception(exc)
                continue
            if self._jobs.empty():
                close_connections()  # before the answer, so a caller that got it finds no connection left open
            for future in futures:
                future.set_result(result)


_reads: FollowerReads | None = None
_reads_lock = threading.Lock()


def follower_reads() -> FollowerReads:
    """This process's FollowerReads, sized by ``DEUZ_FOLLOWER_DATABASE_THREADS`` when first used."""
    global _reads
    if _reads is None:
        with _reads_lock:
            if _reads is None:
                _reads = FollowerReads(size=int(getattr(settings, "DEUZ_FOLLOWER_DATABASE_THREADS", DEFAULT_THREADS)))
    return _reads
