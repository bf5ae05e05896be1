"""What a long-lived process does once start-up has loaded the project: a worker before its first claim, the ASGI
application before its first request."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from deuz_project.heap import heap_freeze_startup

__all__ = [
    "WorkerWarmup", "agents_refuse_bad_entries", "leg_modules_load", "open_database_pools", "worker_process_startup",
    "worker_warmup_start",
]

logger = logging.getLogger("deuz.startup")


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


def leg_modules_load() -> None:
    """Import now what a process's first claim and first leg would import on first use, and build the objects
    they build once: the channel layer (its back end's modules: channels_redis, and with it redis, which imports
    OpenTelemetry's metrics SDK and psutil), the stores (their engine's module) and liveness's back end. Measured
    on a quiet machine (issue 25), a worker restarted after a crash paid 140-225 ms for them inside its first
    takeover: the claim's notice to the run's pages sent the first message through the channel layer, so the
    recovery leg began that much after its claim (20 ms for a worker that had run a leg before). Called before
    the start-up heap freeze (deuz_project.heap), so these modules are frozen with the rest."""
    from channels.layers import get_channel_layer

    from runs.ownership.liveness import liveness_backend_load
    from runs.stores import get_store

    get_channel_layer()
    for alias in settings.DEUZ_STORES:
        get_store(alias)
    liveness_backend_load()


class WorkerWarmup:
    """The warm-up of a worker's first resume (runs.stores.warmup), running on the ORM's thread: asgiref's one
    thread for the ORM calls of a process whose event loop no async_to_sync started (a worker's), where a leg's
    checkpoint reads go. ``wait()`` is what start-up spends on it beyond the work it overlapped."""

    def __init__(self) -> None:
        from asgiref.sync import SyncToAsync

        self.started = time.perf_counter()
        self.seconds = 0.0  # the warm-up's own time, on its thread
        self.waited = 0.0  # start-up's wait for it to finish
        open_database_pools()  # on this thread, before the ORM's thread asks a pool for its first connection
        self._future: Future[None] = SyncToAsync.single_thread_executor.submit(self._warm)

    def _warm(self) -> None:
        from runs.stores.warmup import resume_reads_warm

        began = time.perf_counter()
        try:
            resume_reads_warm()
        except Exception as exc:  # a database not up yet: the first leg connects, as it would have anyway
            logger.warning("The worker's warm-up failed (its first resume connects itself): %s", type(exc).__name__)
        finally:
            self.seconds = time.perf_counter() - began

    def wait(self) -> None:
        began = time.perf_counter()
        self._future.result()
        self.waited = time.perf_counter() - began


def worker_warmup_start() -> WorkerWarmup:
    """Start the warm-up of the worker's first resume (connection, the resume's reads), to overlap what start-up
    does next (``manage.py worker``'s system checks, which import every agent); finished by
    ``worker_process_startup``."""
    return WorkerWarmup()


def worker_process_startup(warmup: WorkerWarmup | None = None) -> int:
    """A worker's start-up: its database pools opened, what its first leg would import loaded
    (``leg_modules_load``), its warm-up (``worker_warmup_start``) finished, then its start-up heap frozen
    (deuz_project.heap); the number of objects frozen."""
    open_database_pools()
    leg_modules_load()
    if warmup is not None:
        warmup.wait()
    return heap_freeze_startup()


def agents_refuse_bad_entries() -> None:
    """Stop start-up with ImproperlyConfigured naming each DEUZ_AGENTS entry that cannot be imported (system check
    runs.E001, which manage.py runs before serve and worker; an ASGI server started on its own runs none)."""
    from runs.checks import check_agents

    errors = check_agents()
    if errors:
        raise ImproperlyConfigured("; ".join(error.msg for error in errors))
