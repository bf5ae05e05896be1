"""Fenced writes without a thread hop, on SQLite: the event loop's thread writes on a connection of its own.

The ORM may not run on an event loop's thread, so every async save used to hop to a worker thread and back,
which cost more than the save itself (the hop, and the caches of another core). A SQLite save is a few
statements that take a fraction of a millisecond on the file the process already has open, so the loop's
thread runs it on a plain sqlite3 connection it owns: BEGIN IMMEDIATE, the fence's UPDATE, the inserts,
COMMIT, with the same guarantees as the ORM's path (the fence in the write's own transaction, everything or
nothing). The connection waits for SQLite's write lock only briefly: a busy database (another process
writing) answers None and the caller takes the ORM's path through a thread, which waits as long as it must.

PostgreSQL and every other back end answer None: their saves keep the ORM's path.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections

__all__ = ["BUSY_SECONDS", "CONNECT_HOOKS", "DirectUnavailable", "close", "fenced_write", "sql"]

logger = logging.getLogger("deuz.stores")

T = TypeVar("T")

#: How long the loop's thread waits for SQLite's write lock before handing the write to a thread instead.
BUSY_SECONDS = 0.05

#: Called with each new direct connection (the benchmarks set PRAGMA synchronous here, as for Django's).
CONNECT_HOOKS: list[Callable[[sqlite3.Connection], None]] = []

_local = threading.local()


class DirectUnavailable(Exception):
    """The write cannot go direct now (not SQLite, or the database is busy): take the ORM's path."""


def sql(statement: str) -> str:
    """An ORM-style statement (``%s`` placeholders) for sqlite3 (``?``)."""
    return statement.replace("%s", "?")


def _connection() -> sqlite3.Connection:
    db = connections[DEFAULT_DB_ALIAS]  # the wrapper only: nothing here connects through Django
    if db.vendor != "sqlite":
        raise DirectUnavailable("not SQLite")
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

