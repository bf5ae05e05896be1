"""Journal throughput: parts appended per second through the fenced journal store, in flush-sized batches.

Bar (issue 4): at least 20,000 parts/s on PostgreSQL and 50,000 on SQLite. A writer flushes every few
milliseconds whatever has accumulated, up to JournalWriter.MAX_BATCH parts a transaction: under load the
batches grow to that size, which is what this measures.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from django.db import connection

from runs.models import Run
from runs.stores import get_store

BARS = {"postgresql": 20_000, "sqlite": 50_000}


@dataclass
class JournalResult:
    vendor: str
    parts: int
    batch: int
    seconds: float

    @property
    def parts_per_second(self) -> float:
        return self.parts / self.seconds

    @property
    def bar(self) -> int:
        return BARS.get(self.vendor, 20_000)


def measure(parts: int = 50_000, batch: int = 1000) -> JournalResult:
    run_id = f"bench-journal-{uuid.uuid4().hex[:8]}"
    run = Run.objects.create(run_id=run_id, agent="bench", input_messages="[]", status="running", owner_epoch=1)
    store = get_store("streams").fenced(run_id, 1)
    deltas = [{"type": "text-delta", "text": f"token{i % 97} "} for i in range(batch)]
    try:
        next_seq = 0
        started = time.perf_counter()
        while next_seq < parts:
            next_seq = store.append_sync(run_id, deltas, first_seq=next_seq) + 1
        elapsed = time.perf_counter() - started
        return JournalResult(connection.vendor, next_seq, batch, elapsed)
    finally:
        run.delete()
