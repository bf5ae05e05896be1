"""SQLite's direct connection: the event loop's thread writes (and reads) on a sqlite3 connection of its own.

A SQLite save is a few statements that take a fraction of a millisecond on the file the process already has
open, so the loop's thread runs it on a plain sqlite3 connection it owns (one per thread, runs.stores.direct
says why): BEGIN IMMEDIATE, the fence's UPDATE, the inserts, COMMIT, with the same guarantees as the ORM's
path (the fence in the write's own transaction, everything or nothing). The connection waits for SQLite's
write lock only briefly: a busy database (another process writing) answers DirectUnavailable and the caller
takes the ORM's path through a thread, which waits as long as it must. Its users: the session store's SQLite
saves and loads (runs.stores.sessions_sqlite) and the journal writer's flushes (runs.wire.writer).
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections

from runs.stores.direct import DirectUnavailable, enabled

__all__ = ["BUSY_SECONDS", "CONNECT_HOOKS", "close", "fenced_write", "prepare", "read", "sql"]

T = TypeVar("T")

#: How long the loop's thread waits for SQLite's write lock before handing the write to a thread instead.
BUSY_SECONDS = 0.05

#: Called with each new direct connection (the benchmarks set PRAGMA synchronous here, as for Django's).
CONNECT_HOOKS: list[Callable[[sqlite3.Connection], None]] = []

_local = threading.local()
_prepared: dict[str, sqlite3.Connection] = {}  # by database file: opened by another thread, for one to take (prepare)
_prepared_lock = threading.Lock()


@functools.cache
def sql(statement: str) -> str:
    """An ORM-style statement (``%s`` placeholders) for sqlite3 (``?``); the few statements of the store, cached."""
    return statement.replace("%s", "?")


def _connection() -> sqlite3.Connection:
    db, name = _database()
    held = getattr(_local, "connection", None)
    if held is not None and _local.name == name:
        return held
    if held is not None:
        held.close()
    with _prepared_lock:
        connection = _prepared.pop(name, None)
    if connection is None:
        connection = _open(db, same_thread=True)
    _local.connection, _local.name = connection, name
    _close_with_the_loop(connection)
    return connection


def _database() -> tuple[Any, str]:
    """The default database's wrapper and file name, when a direct connection may be opened on it."""
    db = connections[DEFAULT_DB_ALIAS]  # the wrapper only: nothing here connects through Django
    if db.vendor != "sqlite":
        raise DirectUnavailable("not SQLite")
    if not enabled():
        raise DirectUnavailable("DEUZ_DIRECT_SAVES is off")
    name = db.settings_dict["NAME"]
    if name in ("", ":memory:"):  # a private in-memory database no second connection can open
        raise DirectUnavailable("a private in-memory database")
    return db, name


def _open(db: Any, *, same_thread: bool) -> sqlite3.Connection:
    params = db.get_connection_params()
    options = db.settings_dict.get("OPTIONS", {})
    connection = sqlite3.connect(
        params["database"], uri=True, isolation_level=None, timeout=BUSY_SECONDS, check_same_thread=same_thread,
    )
    connection.execute("PRAGMA foreign_keys = ON")  # as Django's connections have it
    for statement in str(options.get("init_command") or "").split(";"):
        if statement.strip():
            connection.execute(statement)
    for hook in CONNECT_HOOKS:
        hook(connection)
    return connection


def prepare(warm: Callable[[sqlite3.Cursor], object]) -> None:
    """Open a direct connection on this thread and run ``warm`` on it (in a read transaction), for the first thread
    that then asks for one to take as its own: a worker's warm-up (runs.stores.warmup) prepares the connection
    its event loop's thread will read its first resume on, while that thread is busy with start-up's checks.
    Raises DirectUnavailable when no direct connection can be opened. The connection is used by one thread at a
    time: this one until it is handed over, then only the thread that took it."""
    db, name = _database()
    connection = _open(db, same_thread=False)
    try:
        _read_on(connection, warm)
    except BaseException:
        connection.close()
        raise
    with _prepared_lock:
        replaced = _prepared.pop(name, None)
        _prepared[name] = connection
    if replaced is not None:
        replaced.close()


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
    return _read_on(_connection(), query)


def _read_on(connection: sqlite3.Connection, query: Callable[[sqlite3.Cursor], T]) -> T:
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
