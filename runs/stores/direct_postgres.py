"""PostgreSQL's direct connections: a fenced view's steady save, one statement on its event loop's own connection.

On PostgreSQL a steady save is one statement (runs.stores.sessions_postgres folds the fence, the inserts and the
journal parts into data-modifying CTEs), so a fenced view sends it on the event loop's own async psycopg
connection, in autocommit: one round trip, awaited on the loop, with no thread hop (runs.stores.direct says
why). A few such connections per loop (per process), shared by its legs; a connection that cannot be opened, or
a run's row another transaction holds, answers DirectUnavailable and the ORM's path takes over.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from runs.stores.direct import DirectUnavailable

__all__ = [
    "APPLICATION_NAME", "DEFAULT_CONNECTIONS", "LOCK_TIMEOUT_MS", "RETRY_SECONDS",
    "AsyncPostgres", "connections_per_loop",
]

logger = logging.getLogger("deuz.stores")

#: How long a PostgreSQL direct save waits for a row lock before handing the save to a thread instead.
LOCK_TIMEOUT_MS = 100

#: The application_name of the loops' own PostgreSQL connections (a few per process).
APPLICATION_NAME = "deuz direct saves"

#: Connections an event loop may open for direct writes on PostgreSQL (settings.DEUZ_DIRECT_CONNECTIONS).
DEFAULT_CONNECTIONS = 4

#: After failing to open its PostgreSQL connection (too many clients, say), how long a loop saves through the ORM.
RETRY_SECONDS = 30

#: Executions of one statement shape after which a loop's own connection prepares it (psycopg's default).
PREPARE_THRESHOLD = 5


class AsyncPostgres:
    """A fenced view's door to its event loop's own async connections to the default PostgreSQL database.

    A few connections per event loop (a worker process's, daphne's), shared by every view on it: a statement
    takes an idle one, and another is opened only while all are busy, up to ``DEUZ_DIRECT_CONNECTIONS``
    (default 4). However many legs run, a process holds a few more connections, not one a leg; and 50 legs
    streaming at once do not queue behind one connection (with one, a journal flush waited 64 ms at the
    median). A leg's own writes never overlap (its journal writer flushes one batch at a time, and a save
    waits for its flush), so their order is the leg's. They are opened in autocommit on first use, and closed
    when the loop shuts down its async generators (as ``asyncio.run`` and asgiref do at their end) or by
    ``aclose``."""

    __slots__ = ()

    async def fetch_one(self, statement: str, params: list[Any]) -> tuple[Any, ...] | None:
        """Run one statement (its own transaction) and answer its first row; DirectUnavailable when there is no
        connection to run it on, or the run's row is locked. A broken connection is dropped (the next call opens
        another)."""
        import psycopg

        shared = _loop_connection()
        connection = await shared.take()
        try:
            async with connection.cursor() as cursor:
                await cursor.execute(statement, params)
                return await cursor.fetchone()
        except psycopg.errors.LockNotAvailable as exc:
            # Another transaction holds the run's row (a thread's save may be waiting for the journal writer
            # this save holds): nothing was written; the ORM's path waits for the row instead.
            raise DirectUnavailable("the run's row is locked") from exc
        finally:
            await shared.give_back(connection)

    async def aclose(self) -> None:
        """Close this event loop's connections now (the next direct save opens another)."""
        shared = _by_loop.get(asyncio.get_running_loop())
        if shared is not None:
            await shared.close()


def connections_per_loop() -> int:
    """How many connections an event loop may hold for direct writes (settings.DEUZ_DIRECT_CONNECTIONS)."""
    return max(1, int(getattr(settings, "DEUZ_DIRECT_CONNECTIONS", DEFAULT_CONNECTIONS)))


class _LoopConnection:
    """An event loop's own connections (idle ones, and how many are open), and the async generator that closes
    them with the loop."""

    def __init__(self) -> None:
        self.idle: list[Any] = []
        self.opened = 0  # open connections, idle or in use (and ones being opened)
        self.freed = asyncio.Condition()
        self.failed_at: float | None = None
        self._closer: Any = None
        self._all: set[Any] = set()  # every connection opened and not yet dropped
        # A save's statement planned once a connection: 0.2 ms of the server's 0.6, 0.5 ms of what a save waits
        # here (issue 8). Not through a transaction pooler (pgbouncer's transaction mode), which Django's own
        # setting for it, DISABLE_SERVER_SIDE_CURSORS, says is in the way: statements prepared on one server
        # connection would be missing on the next.
        self.prepares = not connections[DEFAULT_DB_ALIAS].settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")

    async def take(self) -> Any:
        """An idle connection, or a new one while fewer than the limit are open, or the next one given back."""
        async with self.freed:
            while True:
                while self.idle:
                    connection = self.idle.pop()
                    if not connection.closed and not connection.broken:
                        return connection
                    self.opened -= 1
                    self._all.discard(connection)
                if self.opened < connections_per_loop():
                    break
                await self.freed.wait()
            self.opened += 1
        try:
            return await self._open()
        except BaseException:
            async with self.freed:
                self.opened -= 1
                self.freed.notify()
            raise

    async def give_back(self, connection: Any) -> None:
        async with self.freed:
            if connection.closed or connection.broken:
                self.opened -= 1
                self._all.discard(connection)
            else:
                self.idle.append(connection)
            self.freed.notify()
        if connection.broken and not connection.closed:
            await connection.close()

    async def _open(self) -> Any:
        if self.failed_at is not None and time.monotonic() - self.failed_at < RETRY_SECONDS:
            raise DirectUnavailable("this event loop could not open its connection lately")
        import psycopg

        params = connections[DEFAULT_DB_ALIAS].get_connection_params()
        params.pop("cursor_factory", None)
        params.setdefault("application_name", APPLICATION_NAME)  # how pg_stat_activity tells these apart
        # Django turns psycopg's prepared statements off (None) for the sake of poolers; here a statement shape
        # seen five times is prepared, as psycopg does by default (see ``prepares``).
        params["prepare_threshold"] = PREPARE_THRESHOLD if self.prepares else None
        # Waiting for a lock here would block nobody's thread but could wait on a thread that waits on this save
        # (a journal writer's lock): give up at once and let the ORM's path wait. Set at the session's start,
        # not by a statement after it (one round trip fewer before a loop's first save).
        params["options"] = f"{params.get('options') or ''} -c lock_timeout={LOCK_TIMEOUT_MS}ms".strip()
        try:
            # Server-side binding: a save's folded statement with its 25-odd params goes faster than bound here.
            connection = await psycopg.AsyncConnection.connect(
                autocommit=True, cursor_factory=psycopg.AsyncCursor, **params
            )
        except psycopg.Error as exc:
            self.failed_at = time.monotonic()
            logger.warning("No direct connection to PostgreSQL (%s); saves go through the ORM for %d s.",
                           type(exc).__name__, RETRY_SECONDS)
            raise DirectUnavailable(type(exc).__name__) from exc
        self._all.add(connection)
        if self._closer is None:
            self._closer = _closing(self)
            await self._closer.__anext__()  # registered with the loop, which closes them when it shuts down
        return connection

    async def close(self) -> None:
        """Close every connection of this loop (those in use too: their statements fail and the writes retry
        through the ORM)."""
        closer, self._closer = self._closer, None
        if closer is not None:
            await closer.aclose()
        else:
            await self.close_all()

    async def close_all(self) -> None:
        async with self.freed:
            every, self.idle, self.opened, self._all = list(self._all), [], 0, set()
            self.freed.notify_all()
        for connection in every:
            if not connection.closed:
                await connection.close()


async def _closing(shared: _LoopConnection) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await shared.close_all()


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopConnection] = weakref.WeakKeyDictionary()


def _loop_connection() -> _LoopConnection:
    loop = asyncio.get_running_loop()
    shared = _by_loop.get(loop)
    if shared is None:
        shared = _by_loop[loop] = _LoopConnection()
    return shared
