"""The followers' database reads: a few threads shared by every follower of this process (issue 12).

Under daphne each request's synchronous calls run in a thread of its own, and each such thread keeps its own
database connection, so 70 open streams once held 70 PostgreSQL connections and starved the API. Followers
instead read through these threads: at most ``DEUZ_FOLLOWER_DATABASE_THREADS`` connections (default 4) for
any number of followers. A thread keeps its connection while reads queue up, and closes it as soon as it runs
out of work, so a quiet process holds none, and an SQLite file handle is never left behind a gone follower.

Followers of one run ask the same questions at the same moments (where the run stands, its journal after the
same seq: when they connect together, and when its leg ends and each must hear the end from the database), so
such a read is shared (``run_shared``). A caller says how fresh an answer it needs (``fresh_after``): any read
of the same question begun after that moment answers it, whether it still waits for a thread, is running
or has just returned. A follower woken by a notification needs a read begun after the notification was heard;
its journal, a read begun after its look at where the run stands returned. So followers that a busy event loop
serves one after another share the first such read, where each used to start its own once the first had
started (issue 25's fan-out, with clients reconnecting meanwhile: up to 50 reads of one run's end, one per
follower). Without ``fresh_after`` (a first look, a poll) only a read not started yet is joined: a caller may
need what was written after a running one began.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Generic, NamedTuple, TypeVar

from django.conf import settings
from django.db import connections

__all__ = ["DEFAULT_THREADS", "FollowerReads", "Shared", "close_connections", "follower_reads"]

T = TypeVar("T")

DEFAULT_THREADS = 4


def close_connections() -> None:
    """Close this thread's database connections, except one inside a transaction (a test's, or a caller's
    ``atomic``), which must stay open to commit or roll back."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


class Shared(NamedTuple, Generic[T]):
    """A shared read's answer, and when the read returned (``time.monotonic()``): a read begun later saw at least
    what it saw."""

    value: T
    finished_at: float


class _Job:
    """One read, and the futures of every caller waiting for its answer (one, unless it is shared)."""

    __slots__ = ("args", "context", "finished_at", "function", "futures", "key", "result", "started_at")

    def __init__(self, function: Callable[..., Any], args: tuple, key: tuple | None) -> None:
        self.function, self.args, self.key = function, args, key
        self.context = contextvars.copy_context()
        self.futures: list[Future] = [Future()]
        self.started_at: float | None = None  # set when a thread takes it
        self.finished_at: float | None = None  # set when it returned (a failure is never shared once over)
        self.result: Any = None


class FollowerReads:
    """``size`` threads that run blocking reads for async code, each closing its connection when idle."""

    # A shared read's answer is kept for callers still catching up (followers a busy event loop serves one after
    # another) for KEEP_SECONDS, and for at most KEEP questions: a page of a journal may be large.
    KEEP, KEEP_SECONDS = 256, 2.0

    def __init__(self, *, size: int) -> None:
        if size < 1:
            raise ValueError("A FollowerReads needs at least one thread.")
        self.size = size
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        # The latest shared read of each question (function, args): waiting for a thread, running or returned.
        self._latest: OrderedDict[tuple, _Job] = OrderedDict()

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` on one of the threads; a cancelled caller's read is skipped if not yet started."""
        return await asyncio.wrap_future(self.submit(function, *args))

    async def run_shared(self, function: Callable[..., T], *args: Any, fresh_after: float | None = None) -> Shared[T]:
        """``run``, but sharing the same read (``function`` and hashable ``args``) begun after
        ``fresh_after`` (``time.monotonic()``; None: now, so only a read still waiting for a thread): its answer is
        every sharer's, so it must be one no caller changes."""
        return await asyncio.wrap_future(self.submit(function, *args, shared=True, fresh_after=fresh_after))

    def submit(self, function: Callable[..., T], *args: Any, shared: bool = False,
               fresh_after: float | None = None) -> Future:
        self._start_threads()
        key = (function, args) if shared else None
        with self._lock:
            job = self._latest.get(key) if key is not None else None
            if job is not None and (job.started_at is None or (fresh_after is not None and job.started_at > fresh_after)):
                future: Future = Future()
                if job.started_at is not None and job.finished_at is None:
                    # Joining a running read: past cancelling, as the futures it started with are (a caller that
                    # gives up drops its own asyncio future; the thread answers this one all the same).
                    future.set_running_or_notify_cancel()
                    job.futures.append(future)
                elif job.finished_at is None:
                    job.futures.append(future)  # waiting: answered with the others, if not cancelled by then
                else:
                    future.set_result(Shared(job.result, job.finished_at))
                return future
            job = _Job(function, args, key)
            if key is not None:
                self._latest[key] = job
                self._latest.move_to_end(key)
                self._prune()
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
            with self._lock:
                job.started_at = time.monotonic()  # from now on only a caller content with it joins
                if not [future for future in job.futures if future.set_running_or_notify_cancel()]:
                    self._forget(job)  # every caller was cancelled before it started
                    continue
            try:
                result = job.context.run(job.function, *job.args)
            except BaseException as exc:
                close_connections()  # a failed read may have broken its connection; the next one opens afresh
                with self._lock:
                    self._forget(job)
                    futures = list(job.futures)
                for future in futures:
                    if future.running():  # the rest were cancelled before the read started
                        future.set_exception(exc)
                continue
            if self._jobs.empty():
                close_connections()  # before the answer, so a caller that got it finds no connection left open
            with self._lock:
                job.result, job.finished_at = result, time.monotonic()
                futures = list(job.futures)
            answer = result if job.key is None else Shared(result, job.finished_at)
            for future in futures:
                if future.running():  # the rest were cancelled before the read started
                    future.set_result(answer)

    def _prune(self) -> None:
        """Under the lock: drop the oldest answers, past KEEP questions or KEEP_SECONDS old."""
        stale = time.monotonic() - self.KEEP_SECONDS
        while self._latest:
            oldest = next(iter(self._latest.values()))
            if len(self._latest) <= self.KEEP and (oldest.finished_at is None or oldest.finished_at > stale):
                return
            del self._latest[oldest.key]

    def _forget(self, job: _Job) -> None:
        """Under the lock: a job no later caller may share."""
        if job.key is not None and self._latest.get(job.key) is job:
            del self._latest[job.key]


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
