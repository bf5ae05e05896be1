"""Liveness that ends with the process (issue 25): every process that runs legs holds a liveness token for the
worker id it claims runs under, and the token goes the moment the process dies, SIGKILL included. A claimer
that finds a running run whose owner's token is free takes the run over at once with a new epoch, instead of
waiting for its lease to lapse.

The token is a session advisory lock on PostgreSQL (runs.ownership.liveness_postgres) and an ``flock`` on a file
next to the database on SQLite (runs.ownership.liveness_sqlite). A process frozen by SIGSTOP, or cut off from
the database by a partition that leaves its connection up, still holds its token: the lease is the fallback
for what liveness cannot see. A token found free by mistake (its connection dropped while the process lived)
costs a wasted leg, never a duplicate effect: fencing (runs.ownership.fencing) refuses the old owner's writes.

Whoever claims runs holds the token of the id it claims under from before its claim to its leg's end: a worker
for its life (runs.execution.worker, also while it drains), a follower continuing a run from its claim to the
leg's end (runs.execution.continuation), the crash matrix's inline legs (bench.crash_case). A claimer that
holds none looks dead at once, and its run is taken over (a wasted leg: fencing stops its writes). Holds of one
worker id in one process share a token, counted.

A death is heard, not polled for: a look with ``watch=True`` (a worker's claim, a follower's look at its run)
leaves a watch on every owner it found alive, a thread that waits for the owner's token (a shared lock the
database or the kernel grants the moment the holder's session or process ends) and then calls every
``liveness_on_death`` callback of this process, which wake the workers' claims and the followers. While its watch
waits, an owner is known alive without a statement. The workers' look every ``LIVENESS_CHECK_SECONDS`` stays as
the net for an owner no watch covers.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

__all__ = [
    "LIVENESS_CHECK_SECONDS",
    "LivenessToken",
    "liveness_backend_load",
    "liveness_hold",
    "liveness_on_death",
    "liveness_owners_dead",
    "liveness_watches_close",
]

logger = logging.getLogger("deuz.worker")

#: How often a claimer with room for a run looks for running runs whose owner died (the net under the watches).
LIVENESS_CHECK_SECONDS = 0.5
#: At most this many owners watched by one process (each a thread, and on PostgreSQL a connection); owners past
#: it are found by the look.
MAX_WATCHES = 64

_lock = threading.Lock()
_holds: dict[tuple[Any, str], _Hold] = {}


class _Hold:
    __slots__ = ("count", "handle")

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.count = 0


class LivenessToken:
    """One hold of ``worker_id``'s token by this process; the token goes with the last hold's ``release``."""

    def __init__(self, worker_id: str, backend: Any) -> None:
        self.worker_id = worker_id
        self._backend = backend
        self._released = False

    def ensure(self, *, ping: bool = False) -> bool:
        """Take the token again if it was lost (its connection ended, its file was removed); False while it cannot
        be. ``ping`` asks the server whether the holding session is still up."""
        if self._backend is None:
            return True
        key = (self._backend, self.worker_id)
        with _lock:
            hold = _holds[key]
            if self._backend.is_held(self.worker_id, hold.handle, ping=ping):
                return True
            logger.warning("The liveness token of %s was lost; taking it again.", self.worker_id)
            try:
                self._backend.release(self.worker_id, hold.handle)
            except Exception:  # already gone
                pass
            try:
                hold.handle = self._backend.hold(self.worker_id)
            except Exception as exc:
                logger.warning("Taking the liveness token of %s failed (%s).", self.worker_id, type(exc).__name__)
                return False
            return True

    def release(self) -> None:
        """Give this hold back (once; again does nothing)."""
        if self._released or self._backend is None:
            self._released = True
            return
        self._released = True
        key = (self._backend, self.worker_id)
        with _lock:
            hold = _holds[key]
            hold.count -= 1
            if hold.count:
                return
            del _holds[key]
            try:
                self._backend.release(self.worker_id, hold.handle)
            except Exception as exc:  # its process's end releases it anyway
                logger.warning("Releasing the liveness token of %s failed (%s).", self.worker_id, type(exc).__name__)

    def __enter__(self) -> LivenessToken:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def liveness_hold(worker_id: str) -> LivenessToken:
    """Hold ``worker_id``'s token (blocking: the first hold in this process takes it from the database). Raises
    RuntimeError when another live process holds it."""
    backend = _backend()
    if backend is not None:
        key = (backend, worker_id)
        with _lock:
            hold = _holds.get(key)
            if hold is None:
                hold = _holds[key] = _Hold(backend.hold(worker_id))
            hold.count += 1
    return LivenessToken(worker_id, backend)


def liveness_backend_load() -> None:
    """Build (and import) this database's liveness back end now, at a process's start-up, rather than at its first
    hold or look (deuz_project.startup.leg_modules_load)."""
    _backend()


def liveness_owners_dead(worker_ids: Iterable[str], *, watch: bool = False) -> set[str]:
    """Which of ``worker_ids`` no live process holds a token for (their process died, or never took one); none
    when liveness cannot be told on this database (an in-memory SQLite one), where the lease alone decides.
    ``watch`` answers the owners this process watches from their watches, and watches the others found alive, so
    their death calls the ``liveness_on_death`` callbacks."""
    backend = _backend()
    if backend is None:
        return set()
    asked = set(worker_ids)
    if watch:
        with _watch_lock:
            asked -= {worker_id for worker_id in asked
                      if (known := _watches.get((backend, worker_id))) is not None and known.alive}
    if not asked:
        return set()
    dead = backend.dead(asked)
    if watch:
        for worker_id in asked - dead:
            _watch_start(backend, worker_id)
    return dead


def liveness_on_death(callback: Callable[[str], None]) -> Callable[[], None]:
    """Call ``callback(worker_id)``, on a watch's thread, when an owner this process watches dies (or lets its token
    go); returns the function that stops it. A callback must be quick and thread-safe (set an event)."""
    with _watch_lock:
        _death_callbacks.add(callback)

    def unregister() -> None:
        with _watch_lock:
            _death_callbacks.discard(callback)

    return unregister


def liveness_watches_close() -> None:
    """Stop every watch of this process (tests, between two): on PostgreSQL their connections close; a blocked
    ``flock`` cannot be woken, and its thread ends with the holder, calling nobody."""
    with _watch_lock:
        watches = list(_watches.items())
        _watches.clear()
    for (backend, _), watch in watches:
        watch.stop.set()
        stop_waiting = getattr(backend, "stop_waiting", None)
        if stop_waiting is not None:
            stop_waiting(watch.stop)
            watch.thread.join(timeout=5)


class _Watch:
    __slots__ = ("alive", "stop", "thread")

    def __init__(self) -> None:
        self.alive = False  # set once the owner is known to hold its token, until the watch ends
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def is_alive(self) -> None:
        self.alive = True


_watch_lock = threading.Lock()
_watches: dict[tuple[Any, str], _Watch] = {}
_death_callbacks: set[Callable[[str], None]] = set()


def _watch_start(backend: Any, worker_id: str) -> None:
    key = (backend, worker_id)
    with _watch_lock:
        if key in _watches or len(_watches) >= MAX_WATCHES:
            return
        watch = _watches[key] = _Watch()
        watch.thread = threading.Thread(target=_watch_run, args=(backend, worker_id, watch), daemon=True,
                                        name="deuz-liveness-watch")
    watch.thread.start()


def _watch_run(backend: Any, worker_id: str, watch: _Watch) -> None:
    """A watch's thread: wait for the owner's death, forget the watch, call the callbacks."""
    try:
        dead = backend.wait_dead(worker_id, alive=watch.is_alive, stop=watch.stop)
    except Exception as exc:  # the database went away: the look finds the owner's death instead
        logger.warning("Watching the liveness of %s failed (%s).", worker_id, type(exc).__name__)
        dead = False
    with _watch_lock:
        if _watches.get((backend, worker_id)) is watch:
            del _watches[(backend, worker_id)]
        callbacks = list(_death_callbacks) if dead else []
    for callback in callbacks:
        try:
            callback(worker_id)
        except Exception:
            logger.exception("A liveness callback failed.")


def _backend() -> Any:
    db = connections[DEFAULT_DB_ALIAS]
    return _backend_for(db.vendor, str(db.settings_dict.get("NAME") or ""))


@functools.cache
def _backend_for(vendor: str, name: str) -> Any:
    if vendor == "postgresql":
        from runs.ownership.liveness_postgres import AdvisoryLockLiveness

        return AdvisoryLockLiveness()
    if vendor == "sqlite" and name and not name.startswith(":memory:") and "mode=memory" not in name:
        from runs.ownership.liveness_sqlite import FileLiveness

        return FileLiveness(Path(f"{name}.liveness"))
    return None  # no other process shares this database
