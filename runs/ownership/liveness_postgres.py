"""Liveness on PostgreSQL (runs.ownership.liveness): a session advisory lock on a key derived from the worker id,
taken on a connection of the holder's own, outside any pool, and kept open for as long as the token is held.
PostgreSQL drops a session's locks when its connection ends, and a killed process's connections end with it.

A checker never takes the lock (a worker starting again under the same id would find it taken): it reads
pg_locks, one statement for every owner it asks about. A watcher (``wait_dead``) waits on a connection of its own
for the same key's shared lock, which the server grants the moment the holder's session ends (its process
killed, its connection closed), and gives it back at once; holders' locks are exclusive, so pg_locks tells
watchers from holders. A pooler in transaction mode (PgBouncer) must not sit
between the holder and the database, since it would hand the session, and its lock, to others.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

__all__ = ["AdvisoryLockLiveness", "liveness_key"]

#: How long a holder tries for its lock before saying another session holds the worker id.
_HOLD_SECONDS = 2.0


def liveness_key(worker_id: str) -> int:
    """The advisory lock's key of ``worker_id``: 64 bits of a digest, as the signed bigint PostgreSQL takes."""
    digest = hashlib.blake2b(b"deuz-liveness\0" + worker_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class AdvisoryLockLiveness:
    """The liveness tokens of the workers of the default PostgreSQL database."""

    def __init__(self) -> None:
        self._waiting: dict[threading.Event, Any] = {}  # each waiting watch's connection, by its stop event

    def hold(self, worker_id: str) -> Any:
        """A new connection holding the worker's lock; the lock lasts until it is closed (or the process ends).
        Raises RuntimeError when another live session holds the id."""
        holder = _connect()
        deadline = time.monotonic() + _HOLD_SECONDS
        try:
            while not holder.execute("SELECT pg_try_advisory_lock(%s)", [liveness_key(worker_id)]).fetchone()[0]:
                if time.monotonic() > deadline:  # a killed holder's backend may take a moment to notice
                    raise RuntimeError(f"Another live session holds the worker id {worker_id!r}.")
                time.sleep(0.05)
        except BaseException:
            holder.close()
            raise
        return holder

    def is_held(self, worker_id: str, holder: Any, *, ping: bool = False) -> bool:
        """Whether ``holder`` is still up (asked of the server with ``ping``; else as far as psycopg knows)."""
        if holder.closed or holder.broken:
            return False
        if ping:
            try:
                holder.execute("SELECT 1")
            except Exception:  # the server ended the session (a restart, a timeout): its lock went with it
                return False
        return True

    def release(self, worker_id: str, holder: Any) -> None:
        """Unlock, then close: a closed session's locks go only once its backend has seen the close."""
        try:
            if not (holder.closed or holder.broken):
                holder.execute("SELECT pg_advisory_unlock(%s)", [liveness_key(worker_id)])
        finally:
            holder.close()

    def dead(self, worker_ids: Iterable[str]) -> set[str]:
        """The ids whose lock no session of this database holds (pg_locks spells a bigint key as two oids)."""
        keys = {worker_id: liveness_key(worker_id) % 2**64 for worker_id in worker_ids}
        if not keys:
            return set()
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute(
                "SELECT classid::bigint, objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 "
                "AND granted AND mode = 'ExclusiveLock' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
            held = {(high << 32) | low for high, low in cursor.fetchall()}
        return {worker_id for worker_id, key in keys.items() if key not in held}

    def wait_dead(self, worker_id: str, *, alive: Callable[[], None], stop: threading.Event) -> bool:
        """Block until no live session holds ``worker_id`` (True at once when none does now), calling ``alive`` once
        it is known held; False when ``stop`` was set (``stop_waiting`` wakes the wait)."""
        key = liveness_key(worker_id)
        watcher = _connect()
        try:
            watcher.execute("SET lock_timeout = 0")
            watcher.execute("SET statement_timeout = 0")
            self._waiting[stop] = watcher
            if not watcher.execute("SELECT pg_try_advisory_lock_shared(%s)", [key]).fetchone()[0]:
                alive()
                if stop.is_set():
                    return False
                watcher.execute("SELECT pg_advisory_lock_shared(%s)", [key])  # granted when the holder's session ends
            watcher.execute("SELECT pg_advisory_unlock_shared(%s)", [key])
            return not stop.is_set()
        except Exception:
            if stop.is_set():
                return False  # stop_waiting cancelled the wait
            raise
        finally:
            self._waiting.pop(stop, None)
            watcher.close()

    def stop_waiting(self, stop: threading.Event) -> None:
        """Wake the ``wait_dead`` that ``stop`` belongs to (``stop`` set first): its statement is cancelled."""
        watcher = self._waiting.get(stop)
        if watcher is not None:
            try:
                watcher.cancel_safe(timeout=2)
            except Exception:  # closed meanwhile
                pass


def _connect() -> Any:
    """A connection of its own to the default database, in autocommit, outside Django's."""
    import psycopg

    params = connections[DEFAULT_DB_ALIAS].get_connection_params()
    params.pop("cursor_factory", None)
    return psycopg.connect(autocommit=True, **params)
