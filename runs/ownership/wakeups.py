"""Waking workers when a run becomes claimable: workers in this process (the embedded workers of `manage.py
serve`) directly, workers elsewhere by PostgreSQL NOTIFY; other databases' separate workers rely on the poll."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from django.db import connection

__all__ = ["CHANNEL", "runs_listen", "runs_notify", "runs_wake_register"]

logger = logging.getLogger("deuz.worker")

CHANNEL = "deuz_runs"

# The wake events of the workers running in this process, each with the event loop it belongs to.
_local_wakes: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
_local_lock = threading.Lock()


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


def runs_notify() -> None:
    """Tell listening workers a run is claimable (call it on commit)."""
    with _local_lock:
        local = list(_local_wakes)
    for loop, wake in local:
        try:
            loop.call_soon_threadsafe(wake.set)
        except RuntimeError:  # the loop closed (a worker stopping): nothing to wake
            pass
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"NOTIFY {CHANNEL}")


async def runs_listen(wake: asyncio.Event) -> None:
    """PostgreSQL: set ``wake`` on every NOTIFY until cancelled, reconnecting after a failure (the claim loop's
    poll still works meanwhile)."""
    import psycopg

    params = connection.settings_dict
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(
                dbname=params["NAME"], user=params.get("USER") or None, password=params.get("PASSWORD") or None,
                host=params.get("HOST") or None, port=params.get("PORT") or None, autocommit=True,
            ) as listen_connection:
                await listen_connection.execute(f"LISTEN {CHANNEL}")
                async for _ in listen_connection.notifies():
                    wake.set()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("LISTEN %s failed (%s); relying on the poll.", CHANNEL, type(exc).__name__)
            await asyncio.sleep(5)
