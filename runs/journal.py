"""Writing a leg's stream parts to the run's journal, batched, fenced, and never behind its checkpoints.

The writer reads the leg's part log (the StreamChatResult) by position. It flushes every few milliseconds,
and the session store calls it inside every checkpoint transaction, so a checkpoint is never committed
ahead of the parts that led to it. Live followers are woken through a Channels group after each flush.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from runs.runtime.wire import journal_parts
from runs.stores import get_store

__all__ = ["JournalWriter", "run_group_name"]

logger = logging.getLogger("deuz.journal")


def run_group_name(run_id: str) -> str:
    """The Channels group of a run's followers (group names allow only a few characters)."""
    return f"run.{hashlib.sha256(run_id.encode()).hexdigest()[:40]}"


class JournalWriter:
    """Appends one leg's parts to the run's journal. Under load the batches grow (up to MAX_BATCH parts a
    transaction), so a fast model costs a commit per batch, not per delta."""

    MAX_BATCH = 1000

    def __init__(self, *, run_id: str, epoch: int, flush_seconds: float = 0.005) -> None:
        self.run_id = run_id
        self.store = get_store("streams").fenced(run_id, epoch)
        self.flush_seconds = flush_seconds
        self.source: Any = None  # the StreamChatResult, set once the leg starts
        self._taken = 0  # parts of the source already written
        self._next_seq: int | None = None
        self._is_continuation: bool | None = None
        self._lock = threading.Lock()
        self.last_seq = -1
        self._notified = -1
        self._skip_tick = False  # a checkpoint's hook flushed since the last tick
        #: Parts the leg writes before its own (a recovery notice the runtime could not know to send).
        self.prefix: list[dict[str, Any]] = []

    def flush_sync(self) -> int:
        """Write the source's new parts (inside the caller's transaction when there is one)."""
        with self._lock:
            if self.source is None:
                return self.last_seq
            new = self.source.parts_from(self._taken)[: self.MAX_BATCH]
            if not new:
                return self.last_seq
            if self._next_seq is None:
                self._next_seq = self.store.last_seq(self.run_id) + 1
                self._is_continuation = self._next_seq > 0
            parts = journal_parts(new, is_continuation=bool(self._is_continuation))
            if self.prefix:
                parts, self.prefix = [*self.prefix, *parts], []
            if parts:
                self.last_seq = self.store.append(self.run_id, parts, first_seq=self._next_seq)
                self._next_seq = self.last_seq + 1
            self._taken += len(new)
            return self.last_seq

    def flush_all_sync(self) -> int:
        """Flush until every part emitted so far is written (the checkpoint hook: nothing may lag behind)."""
        while self.source is not None and self.source.parts_count() > self._taken:
            self.flush_sync()
            self._skip_tick = True
        return self.last_seq

    def end_leg_sync(self, *, last_parts: list[dict[str, Any]] | tuple = ()) -> int:
        """Flush, then write ``last_parts`` (the worker's own word on how the leg ended, e.g. a scheduled retry)
        and the leg's terminal sentinel after them."""
        self.flush_all_sync()
        with self._lock:
            last = self.store.append(self.run_id, list(last_parts), end_leg=True, first_seq=self._next_seq)
            if last_parts:
                self.last_seq, self._next_seq = last, last + 1
            return last

    async def run(self, done: asyncio.Event) -> None:
        """Flush every few milliseconds until ``done``; wake followers after each flush that wrote parts. A tick
        right after a checkpoint's flush (which writes every part emitted so far) is skipped: that saves a
        transaction and a thread hop per step, and a part still waits at most two ticks."""
        while not done.is_set():
            try:
                await asyncio.wait_for(done.wait(), self.flush_seconds)
            except TimeoutError:
                pass
            await self.tick()

    async def tick(self) -> None:
        """One round of ``run``: flush what is new (unless a checkpoint just did), then wake followers."""
        skip, self._skip_tick = self._skip_tick, False
        if self.source is not None and self.source.parts_count() > self._taken and not skip:
            await sync_to_async(self.flush_sync)()
        await self.notify()

    async def notify(self) -> None:
        if self.last_seq <= self._notified:
            return
        self._notified = self.last_seq
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            await layer.group_send(run_group_name(self.run_id), {"type": "journal.appended", "seq": self.last_seq})
        except Exception as exc:  # a lost wake-up costs followers latency, never a part: they read the journal
            logger.warning("Waking followers of %s failed: %s", self.run_id, type(exc).__name__)
