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
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

__all__ = ["LIVENESS_CHECK_SECONDS", "LivenessToken", "liveness_hold", "liveness_owners_dead"]

logger = logging.getLogger("deuz.worker")

#: How often a claimer with room for a run looks for running runs whose owner died.
LIVENESS_CHECK_SECONDS = 0.5

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


def liveness_owners_dead(worker_ids: Iterable[str]) -> set[str]:
    """Which of ``worker_ids`` no live process holds a token for (their process died, or never took one); none
    when liveness cannot be told on this database (an in-memory SQLite one), where the lease alone decides."""
    backend = _backend()
    if backend is None:
        return set()
    return backend.dead(worker_ids)


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
