"""A worker's first resume without a cold connection: what ``manage.py worker`` runs once at start-up, on the ORM's
thread, while its system checks run (deuz_project.startup.worker_warmup_start).

A fresh process's first resume used to pay, inside its first leg, what every later one is spared: the ORM
thread's start, the database connection, and on PostgreSQL a new backend's first look at the history tables
(their catalog entries, the statements' plans: 2.1 + 1.2 ms against 0.3 + 0.6 warm, issue 8) and psycopg's
first loaders. The same two reads a resume makes, for a key no run has, pay them once, beside start-up's other
work rather than in front of the first run: the connection stays the ORM thread's, where the resume reads.
"""

from __future__ import annotations

from django.db import connection

from runs.runtime.exceptions import CheckpointCorruptError
from runs.stores import direct_sqlite
from runs.stores.direct import DirectUnavailable
from runs.stores.sessions import _chain_rows, _latest_row

__all__ = ["resume_reads_warm"]

_NO_RUN = "deuz warm-up"  # no run can have this id: runs.models.RUN_ID_VALIDATOR refuses spaces


#: How long the warm-up waits for a pooled connection: a database that is not up does not hold start-up (or the
#: process's exit, which waits for the ORM's thread) for the pool's own timeout.
CONNECT_SECONDS = 2.0


def resume_reads_warm() -> None:
    """Connect, and run a resume's two reads (the latest checkpoint, the history chain) for a key no run has.
    Raises what connecting raised (psycopg_pool's PoolTimeout after ``CONNECT_SECONDS``)."""
    pool = getattr(connection, "pool", None)  # PostgreSQL's, when configured
    if pool is not None and connection.connection is None:
        pool.putconn(pool.getconn(timeout=CONNECT_SECONDS))  # one there, or none within the bound
    connection.ensure_connection()
    _latest_row(_NO_RUN)
    try:
        _chain_rows(_NO_RUN, 0)
    except CheckpointCorruptError:  # nothing there, as meant: the statement ran
        pass
    if connection.vendor == "sqlite":
        # A fenced view reads a resume's checkpoint on its event loop thread's own connection: opened here, its
        # schema parsed and the two statements run, and taken by that thread at its first read (1-2 ms of a
        # fresh process's first resume, issue 25).
        try:
            direct_sqlite.prepare(_direct_reads)
        except DirectUnavailable:  # an in-memory database, or DEUZ_DIRECT_SAVES off: the ORM's thread reads
            pass


def _direct_reads(cursor) -> None:
    _latest_row(_NO_RUN, cursor)
    try:
        _chain_rows(_NO_RUN, 0, cursor)
    except CheckpointCorruptError:  # nothing there, as meant
        pass

