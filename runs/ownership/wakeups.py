"""Waking workers when a run becomes claimable, and a running leg when its run is cancelled: legs and workers in
this process (the embedded workers of `manage.py serve`, the API that cancels) directly, those elsewhere by
PostgreSQL NOTIFY on the LISTEN connection each worker holds; other databases' separate processes rely on the
poll (a leg polls its cancel every ``CANCEL_POLL_SECONDS`` while no LISTEN connection of its process is up)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import defaultdict
from collections.abc import Callable

from django.db import connection

__all__ = [
    "CANCEL_CHANNEL",
    "CANCEL_POLL_SECONDS",
    "CHANNEL",
    "run_cancel_notify",
    "run_cancel_watch",
    "run_cancels_are_pushed",
    "runs_listen",
    "runs_notify",
    "runs_wake_register",
]

logger = logging.getLogger("deuz.worker")

CHANNEL = "deuz_runs"
#: NOTIFY's channel for cancels; the payload is the run id.
CANCEL_CHANNEL = "deuz_cancels"
#: How often a running leg reads its run's cancel when nothing pushes cancels to its process (SQLite, or a
#: PostgreSQL process whose LISTEN connection is down): a cancel stops a leg within this, plus the step's await.
CANCEL_POLL_SECONDS = 0.25

# The wake events of the workers running in this process, each with the event loop it belongs to.
_local_wakes: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
# The cancel events of the legs running in this process, by run id.
_cancel_watches: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = defaultdict(set)
_local_lock = threading.Lock()
_listening = 0  # LISTEN connections up in this process (every worker holds one on PostgreSQL)


def runs_wake_register(wake: asyncio.Event) -> Callable[[], None]:
    """Set ``wake`` (on the running loop's thread) whenever this process says a run is claimable; returns the
    function that stops it. On SQLite this is what wakes an embedded worker at once rather than at its poll."""
    entry = (asyncio.get_running_loop(), wake)
    with _local_lock:
        _local_wakes.add(entry)

    def unregister() -> None:
        with _local_lock:
            _local_wakes.discard(entry)

    return unregister


def _set_all(entries: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]) -> None:
    for loop, event in entries:
        try:
            loop.call_soon_threadsafe(event.set)
        except RuntimeError:  # the loop closed (a worker stopping): nothing to wake
            pass


def runs_notify() -> None:
    """Tell listening workers a run is claimable (call it on commit)."""
    with _local_lock:
        local = list(_local_wakes)
    _set_all(local)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"NOTIFY {CHANNEL}")


def run_cancel_watch(run_id: str, cancelled: asyncio.Event) -> Callable[[], None]:
    """Set ``cancelled`` (on the running loop's thread) when a cancel of ``run_id`` is heard in this process, from
    this process or by NOTIFY; returns the function that stops it."""
    entry = (asyncio.get_running_loop(), cancelled)
    with _local_lock:
        _cancel_watches[run_id].add(entry)

    def unregister() -> None:
        with _local_lock:
            watches = _cancel_watches.get(run_id)
            if watches is not None:
                watches.discard(entry)
                if not watches:
                    del _cancel_watches[run_id]

    return unregister


def _cancel_heard(run_id: str) -> None:
    with _local_lock:
        local = list(_cancel_watches.get(run_id, ()))
    _set_all(local)


def run_cancel_notify(run_id: str) -> None:
    """Tell the leg running ``run_id``, wherever it runs, that the run was cancelled (call it on commit)."""
    _cancel_heard(run_id)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CANCEL_CHANNEL, run_id])


def run_cancels_are_pushed() -> bool:
    """Whether a cancel made in another process reaches this one at once (a LISTEN connection is up here)."""
    return _listening > 0


def _listening_add(change: int) -> None:
    global _listening
    with _local_lock:
        _listening += change


async def runs_listen(wake: asyncio.Event) -> None:
    """PostgreSQL: set ``wake`` on every NOTIFY of a claimable run and pass each cancel to the legs of this process
    that watch it, until cancelled, reconnecting after a failure (the claim loop's and the legs' polls still
    work meanwhile)."""
    import psycopg

    params = connection.settings_dict
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(
                dbname=params["NAME"], user=params.get("USER") or None, password=params.get("PASSWORD") or None,
                host=params.get("HOST") or None, port=params.get("PORT") or None, autocommit=True,
            ) as listen_connection:
                await listen_connection.execute(f"LISTEN {CHANNEL}")
                await listen_connection.execute(f"LISTEN {CANCEL_CHANNEL}")
                _listening_add(1)
                try:
                    async for notify in listen_connection.notifies():
                        if notify.channel == CANCEL_CHANNEL:
                            _cancel_heard(notify.payload)
                        else:
                            wake.set()
                finally:
                    _listening_add(-1)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("LISTEN %s failed (%s); relying on the poll.", CHANNEL, type(exc).__name__)
            await asyncio.sleep(5)
