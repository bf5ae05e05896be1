"""Waking workers: PostgreSQL NOTIFY when a run becomes claimable; other databases rely on the poll."""

from __future__ import annotations

import asyncio
import logging

from django.db import connection

__all__ = ["CHANNEL", "runs_listen", "runs_notify"]

logger = logging.getLogger("deuz.worker")

CHANNEL = "deuz_runs"


def runs_notify() -> None:
    """Tell listening workers a run is claimable (call it on commit)."""
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
