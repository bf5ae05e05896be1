"""Fenced writes without a thread hop: the event loop's thread writes on a connection of its own.

The ORM may not run on an event loop's thread, so every async save used to hop to a worker thread and back,
which cost more than the save itself (the hop, and the caches of another core). A SQLite save is a few
statements that take a fraction of a millisecond on the file the process already has open, so the loop's
thread runs it on a plain sqlite3 connection it owns: BEGIN IMMEDIATE, the fence's UPDATE, the inserts,
COMMIT, with the same guarantees as the ORM's path (the fence in the write's own transaction, everything or
nothing). The connection waits for SQLite's write lock only briefly: a busy database (another process
writing) answers None and the caller takes the ORM's path through a thread, which waits as long as it must.

On PostgreSQL a steady save is one statement (runs.stores.db folds the fence, the inserts and the journal parts
into data-modifying CTEs), so a fenced view sends it on an async psycopg connection of its own, in autocommit:
one round trip, awaited on the loop. The view opens it on its first such save and closes it with the leg
(``aclose``); a connection that cannot be opened answers DirectUnavailable and the ORM's path takes over.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

__all__ = [
    "BUSY_SECONDS", "CONNECT_HOOKS", "LOCK_TIMEOUT_MS", "AsyncPostgres", "DirectUnavailable", "close", "enabled",
    "fenced_write", "sql",
]

logger = logging.getLogger("deuz.stores")

T = TypeVar("T")

#: How long the loop's thread waits for SQLite's write lock before handing the write to a thread instead.
BUSY_SECONDS = 0.05

#: How long a PostgreSQL direct save waits for a row lock before handing the save to a thread instead.
LOCK_TIMEOUT_MS = 100

#: Called with each new direct connection (the benchmarks set PRAGMA synchronous here, as for Django's).
CONNECT_HOOKS: list[Callable[[sqlite3.Connection], None]] = []

_local = threading.local()


class DirectUnavailable(Exception):
    """The write cannot go direct now (not SQLite, or the database is busy): take the ORM's path."""


def sql(statement: str) -> str:
    """An ORM-style statement (``%s`` placeholders) for sqlite3 (``?``)."""
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
    return connection


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


def close() -> None:
    """Close this thread's direct connection (tests and the benchmarks, before they drop a database)."""
    held = getattr(_local, "connection", None)
    if held is not None:
        held.close()
        _local.connection = None



class AsyncPostgres:
    """One fenced view's own async connection to the default PostgreSQL database, in autocommit, opened on first
    use on the event loop that uses it. Failing to open it is remembered: the view keeps the ORM's path."""

    __slots__ = ("_connection", "_failed")

    def __init__(self) -> None:
        self._connection: Any = None
        self._failed = False

    async def fetch_one(self, statement: str, params: list[Any]) -> tuple[Any, ...] | None:
        """Run one statement (its own transaction) and answer its first row; DirectUnavailable when there is no
        connection to run it on. A broken connection is dropped, so the next call opens a new one."""
        import psycopg

        connection = await self._open()
        try:
            async with connection.cursor() as cursor:
                await cursor.execute(statement, params)
                return await cursor.fetchone()
        except psycopg.errors.LockNotAvailable as exc:
            # Another transaction holds the run's row (a thread's save may be waiting for the journal writer this
            # save holds): nothing was written; the ORM's path waits for the row instead.
            raise DirectUnavailable("the run's row is locked") from exc
        except BaseException:
            if connection.broken or connection.closed:
                self._connection = None
            raise

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None and not connection.closed:
            await connection.close()

    async def _open(self) -> Any:
        if self._connection is not None and not self._connection.closed:
            return self._connection
        if self._failed:
            raise DirectUnavailable("this view could not open its connection")
        import psycopg

        db = connections[DEFAULT_DB_ALIAS]
        params = db.get_connection_params()
        params.pop("cursor_factory", None)
        try:
            # Server-side binding: a save's folded statement with its 25-odd params goes faster than bound here.
            self._connection = await psycopg.AsyncConnection.connect(
                autocommit=True, cursor_factory=psycopg.AsyncCursor, **params
            )
            # Waiting for a lock here would block nobody's thread but could wait on a thread that waits on this
            # save (a journal writer's lock): give up at once and let the ORM's path wait.
            await self._connection.execute(f"SET lock_timeout = '{LOCK_TIMEOUT_MS}ms'")
        except psycopg.Error as exc:
            self._failed = True
            logger.warning("No direct connection to PostgreSQL (%s); saves go through the ORM.", type(exc).__name__)
            raise DirectUnavailable(type(exc).__name__) from exc
        return self._connection
