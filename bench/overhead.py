"""Durable overhead per step: what the fenced session store adds to a step, beside the database's own floor.

Overhead = (the run through the store - the same run without one) / steps, on the workload of bench.workload,
with the store exactly as a worker's leg builds it. The floor is measured in the same sitting on the same
database: one INSERT + COMMIT of each save's new messages, as many commits as the store made. Also measured:
growth (the store's time in steps 191-200 over steps 1-10) and bytes stored over the final history's size.
Bars (issue 8): overhead under 1.0 ms on SQLite (synchronous NORMAL and FULL), under 1.5 ms on PostgreSQL;
growth at most 1.1; bytes under 2x.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection

from bench.storage import stored_bytes
from bench.workload import TimedStore, bench_run, close_thread_connections, durable_store, run_steps, sqlite_synchronous
from runs.models import Run
from runs.runtime.codec import encode_value
from runs.stores import direct_sqlite

__all__ = ["BARS", "Spread", "measure"]

BARS = {"sqlite": 1.0, "postgresql": 1.5}


@dataclass
class Spread:
    """Median, min and max of repeated measurements (milliseconds, or a ratio)."""

    median: float
    min: float
    max: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        return cls(statistics.median(values), min(values), max(values))

    def __str__(self) -> str:
        return f"{self.median:.3f} [{self.min:.3f}-{self.max:.3f}]"


@dataclass
class OverheadResult:
    label: str
    vendor: str
    synchronous: str
    steps: int
    repeats: int
    overhead_ms: Spread
    floor_ms: Spread
    save_wait_ms: Spread
    growth: Spread
    saves: int
    statements_per_save: float
    stored_bytes: int
    history_bytes: int
    plain_step_ms: Spread
    cpu_ms: Spread
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return self.overhead_ms.median / self.floor_ms.median

    @property
    def bar(self) -> float:
        return BARS.get(self.vendor, 1.5)

    @property
    def bytes_ratio(self) -> float:
        return self.stored_bytes / self.history_bytes

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(ratio=self.ratio, bar=self.bar, bytes_ratio=self.bytes_ratio)
        return data


def measure(
    *, steps: int = 200, repeats: int = 5, synchronous: str | None = None, direct_saves: bool = True
) -> OverheadResult:
    """Repeat the durable and the plain run ``repeats`` times (after one warm-up each), then the floor. With
    ``direct_saves`` off every save goes through the ORM's thread, as before runs.stores.direct (for comparison)."""
    from django.test import override_settings

    with sqlite_synchronous(synchronous), override_settings(DEUZ_DIRECT_SAVES=direct_saves):
        result = asyncio.run(_measure(steps, repeats, synchronous))
    if not direct_saves:
        result.label += ", every save through the ORM's thread (DEUZ_DIRECT_SAVES=0)"
    return result


async def _measure(steps: int, repeats: int, synchronous: str | None) -> OverheadResult:
    vendor = connection.vendor
    mode = await sync_to_async(_synchronous_mode)()
    durable, plain, waits, growths, floor, cpu = [], [], [], [], [], []
    saves = 0
    history: list[dict[str, Any]] = []
    stored = 0
    try:
        await sync_to_async(_floor_table)(create=True)
        # Each repeat runs the plain run, the durable run and the floor back to back, so a machine whose load
        # drifts (a shared one) weighs on the three alike.
        for attempt in range(repeats + 1):
            plain_cpu = time.process_time()
            plain_seconds = await run_steps(steps)
            plain_cpu = time.process_time() - plain_cpu
            run = await sync_to_async(bench_run)("overhead")
            store = TimedStore(durable_store(run.run_id))
            durable_cpu = time.process_time()
            seconds = await run_steps(steps, store=store, run_id=run.run_id)
            durable_cpu = time.process_time() - durable_cpu
            if attempt == 0:  # the warm-up: keep the history (the floor writes it) and count bytes, time nothing
                history = (await sync_to_async(store.inner.load_sync)(run.run_id))["messages"]
                stored = await sync_to_async(stored_bytes)(run.run_id)
            else:
                durable.append(seconds)
                plain.append(plain_seconds)
                cpu.append(durable_cpu - plain_cpu)
                waits.append(sum(store.seconds.values()))
                growths.append(_growth(store.seconds, steps))
                floor.append(await sync_to_async(_floor)(history))
            saves = store.saves
            await sync_to_async(Run.objects.filter(pk=run.pk).delete)()
        statements = await _statements_per_save(steps)
    finally:
        await sync_to_async(_floor_table)(create=False)
        await close_thread_connections()
    history_bytes = len(json.dumps(encode_value(history)))
    overheads = [(d - p) / steps * 1000 for d, p in zip(durable, plain)]
    label = {"sqlite": f"SQLite (WAL, synchronous {mode})", "postgresql": "PostgreSQL"}.get(vendor, vendor)
    return OverheadResult(
        label=label, vendor=vendor, synchronous=mode, steps=steps, repeats=repeats,
        overhead_ms=Spread.of(overheads),
        floor_ms=Spread.of([seconds / steps * 1000 for seconds in floor]),
        save_wait_ms=Spread.of([wait / steps * 1000 for wait in waits]),
        growth=Spread.of(growths),
        saves=saves,
        statements_per_save=statements,
        stored_bytes=stored,
        history_bytes=history_bytes,
        plain_step_ms=Spread.of([p / steps * 1000 for p in plain]),
        cpu_ms=Spread.of([seconds / steps * 1000 for seconds in cpu]),
    )


def _synchronous_mode() -> str:
    if connection.vendor != "sqlite":
        return ""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA synchronous")
        return {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[cursor.fetchone()[0]]


def _growth(seconds: dict[int, float], steps: int) -> float:
    """The store's time in the last ten steps over the first ten."""
    first = sum(seconds.get(step, 0.0) for step in range(10))
    last = sum(seconds.get(step, 0.0) for step in range(steps - 10, steps))
    return last / first


async def _statements_per_save(steps: int) -> float:
    """SQL statements per save in one run, counted on the connection the saves use (BEGIN and COMMIT included)."""
    counted: list[str] = []

    def count(execute, sql, params, many, context):
        counted.append(sql)
        return execute(sql, params, many, context)

    def install() -> None:
        connection.ensure_connection()
        connection.execute_wrappers.append(count)

    def remove() -> None:
        connection.execute_wrappers.remove(count)

    traced: list[str] = []  # the event loop's own connection's statements (runs.stores.direct), BEGIN and COMMIT too

    def trace(raw: Any) -> None:
        raw.set_trace_callback(traced.append)

    run = await sync_to_async(bench_run)("statements")
    store = TimedStore(durable_store(run.run_id))
    await sync_to_async(install)()
    direct_sqlite.close()
    direct_sqlite.CONNECT_HOOKS.append(trace)
    try:
        await run_steps(steps, store=store, run_id=run.run_id)
    finally:
        await sync_to_async(remove)()
        direct_sqlite.CONNECT_HOOKS.remove(trace)
        direct_sqlite.close()
    await sync_to_async(Run.objects.filter(pk=run.pk).delete)()
    # COMMIT (and on PostgreSQL BEGIN) of the ORM's saves goes through the driver, not the wrappers: add them.
    unseen = 1 if any(sql.startswith("BEGIN") for sql in counted) else 2
    direct_saves = sum(sql.startswith('INSERT INTO "runs_checkpoint"') for sql in traced)
    return (len(counted) + unseen * (store.saves - direct_saves) + len(traced)) / store.saves


_FLOOR_TABLE = "bench_floor"


def _floor_table(*, create: bool) -> None:
    sqlite = connection.vendor == "sqlite"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {_FLOOR_TABLE}")
        if create:
            key = "INTEGER PRIMARY KEY" if sqlite else "BIGSERIAL PRIMARY KEY"
            cursor.execute(f"CREATE TABLE {_FLOOR_TABLE} (id {key}, data {'BLOB' if sqlite else 'BYTEA'} NOT NULL)")


def _floor(history: list[dict[str, Any]]) -> float:
    """Seconds for the run's saves done as bare INSERT + COMMIT of each save's new messages (raw driver calls).

    The saves of a run write, in order, the input and the first decision, then each later message alone."""
    batches = [[history[0], history[1]], *([message] for message in history[2:])]
    encoded = [[(json.dumps(encode_value(message)).encode(),) for message in batch] for batch in batches]
    connection.ensure_connection()
    sqlite = connection.vendor == "sqlite"
    sql = f"INSERT INTO {_FLOOR_TABLE} (data) VALUES ({'?' if sqlite else '%s'})"
    cursor = connection.connection.cursor()
    try:
        started = time.perf_counter()
        for batch in encoded:
            cursor.execute("BEGIN IMMEDIATE" if sqlite else "BEGIN")
            cursor.executemany(sql, batch)
            cursor.execute("COMMIT")
        return time.perf_counter() - started
    finally:
        cursor.close()
