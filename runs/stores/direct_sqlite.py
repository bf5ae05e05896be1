"""Fenced writes without a thread hop: the event loop's thread writes on a connection of its own.

The ORM may not run on an event loop's thread, so every async save used to hop to a worker thread and back,
which cost more than the save itself (the hop, and the caches of another core). A SQLite save is a few
statements that take a fraction of a millisecond on the file the process already has open, so the loop's
thread runs it on a plain sqlite3 connection it owns: BEGIN IMMEDIATE, the fence's UPDATE, the inserts,
COMMIT, with the same guarantees as the ORM's path (the fence in the write's own transaction, everything or
nothing). The connection waits for SQLite's write lock only briefly: a busy database (another process
writing) answers None and the caller takes the ORM's path through a thread, which waits as long as it must.

On PostgreSQL a steady save is one statement (runs.stores.sessions folds the fence, the inserts and the journal parts
into data-modifying CTEs), so a fenced view sends it on the event loop's own async psycopg connection, in
autocommit: one round trip, awaited on the loop. A few such connections per loop (per process), shared by its
legs; a connection that cannot be opened answers DirectUnavailable and the ORM's path takes over.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sqlite3
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

__all__ = [
    "APPLICATION_NAME", "BUSY_SECONDS", "CONNECT_HOOKS", "DEFAULT_CONNECTIONS", "LOCK_TIMEOUT_MS", "RETRY_SECONDS",
    "AsyncPostgres", "DirectUnavailable",
    "close", "connections_per_loop", "enabled", "fenced_write", "read", "sql",
]

logger = logging.getLogger("deuz.stores")

T = TypeVar("T")

#: How long the loop's thread waits for SQLite's write lock before handing the write to a thread instead.
BUSY_SECONDS = 0.05

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

#: Called with each new direct connection (the benchmarks set PRAGMA synchronous here, as for Django's).
CONNECT_HOOKS: list[Callable[[sqlite3.Connection], None]] = []

_local = threading.local()


class DirectUnavailable(Exception):
    """The write cannot go direct now (not SQLite, or the database is busy): take the ORM's path."""


@functools.cache
def sql(statement: str) -> str:
    """An ORM-style statement (``%s`` placeholders) for sqlite3 (``?``); the few statements of the store, cached."""
    return statement.replace("%s", "?")


def enabled() -> bool:
    """Whether direct saves are on (settings.DEUZ_DIRECT_SAVES)."""
    return bool(getattr(settings, "DEUZ_DIRECT_SAVES", True))


def _connection() -> sqlite3.Connection:
    db = connections[DEFAULT_DB_ALIAS]  # the wrapper only: nothing here connects through Django
    if db.vendor != "sqlite":
        raise DirectUnavailable("not SQLite")
    if not enabled():
        raise DirectUnavailable("DEUZ_DIRECT_SAVES is off")
    name = db.settings_dict["NAME"]
    if name in ("", ":memory:"):  # a private in-memory database no second connection can open
        raise DirectUnavailable("a private in-memory database")
    held = getattr(_local, "connection", None)
    if held is not None and _local.name == name:
        return held
    if held is not None:
        held.close()
    params = db.get_connection_params()
    options = db.settings_dict.get("OPTIONS", {})
    connection = sqlite3.connect(
        params["database"], uri=True, isolation_level=None, timeout=BUSY_SECONDS, check_same_thread=True,
    )
    connection.execute("PRAGMA foreign_keys = ON")  # as Django's connections have it
    for statement in str(options.get("init_command") or "").split(";"):
        if statement.strip():
            connection.execute(statement)
    for hook in CONNECT_HOOKS:
        hook(connection)
    _local.connection, _local.name = connection, name
    _close_with_the_loop(connection)
    return connection


def _close_with_the_loop(connection: sqlite3.Connection) -> None:
    """Close ``connection`` when the event loop running now shuts down its async generators (as ``asyncio.run``
    and asgiref do at their end, on this thread), as a loop's PostgreSQL connections close: a connection opened
    by a loop that has ended holds no file handle on."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # no loop: the connection lives with its thread
    closer = _closing_sqlite(connection)
    try:
        closer.__anext__().send(None)  # registers the generator with the loop, and runs it to its yield
    except StopIteration:
        pass
    _local.closer = closer  # the loop holds its generators weakly


async def _closing_sqlite(connection: sqlite3.Connection) -> AsyncIterator[None]:
    try:
        yield
    finally:
        if getattr(_local, "connection", None) is connection:
            _local.connection = None
        connection.close()


def fenced_write(write: Callable[[sqlite3.Cursor], T]) -> T:
    """Run ``write`` in one transaction on this thread's own connection and commit it; raises DirectUnavailable
    (nothing written) when it cannot start now. ``write`` runs the fence's UPDATE first, as every fenced write
    does; whatever it raises rolls the transaction back and propagates."""
    connection = _connection()
    cursor = connection.cursor()
    try:
        try:
            cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:  # locked by another writer: a thread waits for it instead
            raise DirectUnavailable(str(exc)) from exc
        try:
            result = write(cursor)
            cursor.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.rollback()
            raise
        return result
    finally:
        cursor.close()


def read(query: Callable[[sqlite3.Cursor], T]) -> T:
    """Run ``query`` in one read transaction (one snapshot of the database) on this thread's own connection;
    raises DirectUnavailable (nothing read: the caller reads through the ORM's thread) when it cannot now. In WAL
    mode a reader waits for nobody, so a resume's load need not hop to a thread and back."""
    connection = _connection()
    cursor = connection.cursor()
    try:
        try:
            cursor.execute("BEGIN")
            return query(cursor)
        except sqlite3.OperationalError as exc:  # busy for a moment, say: the ORM's path answers (or raises) instead
            raise DirectUnavailable(str(exc)) from exc
        finally:
            if connection.in_transaction:
                connection.rollback()
    finally:
        cursor.close()


def close() -> None:
    """Close this thread's direct connection (tests and the benchmarks, before they drop a database)."""
    held = getattr(_local, "connection", None)
    if held is not None:
        held.close()
        _local.connection = None



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
