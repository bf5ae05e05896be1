"""What a long-lived process does once start-up has loaded the project: a worker before its first claim, the ASGI
application before its first request."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from deuz_project.heap import heap_freeze_startup

__all__ = ["agents_refuse_bad_entries", "open_database_pools", "worker_process_startup"]


def open_database_pools() -> int:
    """Open each configured psycopg pool now, as psycopg_pool advises at a program's start: its threads start
    here (no connection opens: the pools have no minimum), not inside the process's first query. Django opens a
    pool lazily, so a fresh worker's first claim (or its first resume) waited 0.7-1 ms for two threads to start
    (issue 8). The number of pools opened."""
    opened = 0
    for alias in connections:
        pool = getattr(connections[alias], "pool", None)  # only the PostgreSQL back end has one, when configured
        if pool is not None:
            pool.open()
            opened += 1
    return opened


def worker_process_startup() -> int:
    """A worker's start-up: its database pools opened, then its start-up heap frozen (deuz_project.heap); the
    number of objects frozen."""
    open_database_pools()
    return heap_freeze_startup()


def agents_refuse_bad_entries() -> None:
    """Stop start-up with ImproperlyConfigured naming each DEUZ_AGENTS entry that cannot be imported (system check
    runs.E001, which manage.py runs before serve and worker; an ASGI server started on its own runs none)."""
    from runs.checks import check_agents

    errors = check_agents()
    if errors:
        raise ImproperlyConfigured("; ".join(error.msg for error in errors))
