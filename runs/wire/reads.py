"""The followers' database reads: a few threads shared by every follower of this process (issue 12).

Under daphne each request's synchronous calls run in a thread of its own, and each such thread keeps its own
database connection, so 70 open streams once held 70 PostgreSQL connections and starved the API. Followers
instead read through these threads: at most ``DEUZ_FOLLOWER_DATABASE_THREADS`` connections (default 4) for
any number of followers. A thread keeps its connection while reads queue up, and closes it as soon as it runs
out of work, so a quiet process holds none, and an SQLite file handle is never left behind a gone follower.
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


class FollowerReads:
    """``size`` threads that run blocking reads for async code, each closing its connection when idle."""

    def __init__(self, *, size: int) -> None:
        if size < 1:
            raise ValueError("A FollowerReads needs at least one thread.")
        self.size = size
        self._jobs: queue.SimpleQueue[tuple[Future, contextvars.Context, Callable[..., Any], tuple]] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` on one of the threads; a cancelled caller's read is skipped if not yet started."""
        return await asyncio.wrap_future(self.submit(function, *args))

    def submit(self, function: Callable[..., T], *args: Any) -> Future[T]:
        self._start_threads()
        future: Future[T] = Future()
        self._jobs.put((future, contextvars.copy_context(), function, args))
        return future

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
            future, context, function, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = context.run(function, *args)
            except BaseException as exc:
                close_connections()  # a failed read may have broken its connection; the next one opens afresh
                future.set_exception(exc)
                continue
            if self._jobs.empty():
                close_connections()  # before the answer, so a caller that got it finds no connection left open
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
