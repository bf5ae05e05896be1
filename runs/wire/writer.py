"""Writing a leg's stream parts to the run's journal, batched, fenced, and never behind its checkpoints.

The writer reads the leg's part log (the StreamChatResult) by position. It flushes every few milliseconds,
and the session store calls it inside every checkpoint transaction, so a checkpoint is never committed
ahead of the parts that led to it. Live followers are woken through a Channels group after each flush.

The wake-up carries the parts committed since the last one, as the journal stores them (sealed when
encryption keys are set), so a live follower needs no read of the journal per part (runs.wire.followers): a
part is in a notification only once its transaction committed (``transaction.on_commit`` inside a
checkpoint's), and one too large to carry is left to a read.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import DEFAULT_DB_ALIAS, connections, transaction

from runs.runtime.wire import journal_parts
from runs.stores import direct_sqlite, get_store
from runs.stores.direct import DirectUnavailable
from runs.wire.groups import run_stream_group

__all__ = ["JournalWriter"]

logger = logging.getLogger("deuz.journal")


class JournalWriter:
    """Appends one leg's parts to the run's journal. Under load the batches grow (up to MAX_BATCH parts a
    transaction), so a fast model costs a commit per batch, not per delta."""

    MAX_BATCH = 1000
    #: The most text of parts one notification carries; more is left to the followers' read of the journal.
    NOTIFY_MAX_CHARS = 256 * 1024

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
        # Parts' journal texts for the notifications, when the store encodes them apart (encode_parts).
        self._encode = getattr(self.store, "encode_parts", None)
        self._notes_lock = threading.Lock()  # guards _written, _committed, _sent (quick operations only)
        self._written: list[tuple[int, list[str]]] = []  # batches written since the last notification (first seq, texts)
        self._committed = -1  # the last seq whose transaction committed
        self._sent = -1  # the last seq a notification carried, or passed over
        #: Parts the leg writes before its own (a recovery notice the runtime could not know to send).
        self.prefix: list[dict[str, Any]] = []

    def flush_sync(self) -> int:
        """Write the source's new parts (inside the caller's transaction when there is one)."""
        with self._lock:
            if self.source is None or self.source.parts_count() <= self._taken:
                return self.last_seq
            if self._next_seq is None:
                self._next_seq = self.store.last_seq(self.run_id) + 1
                self._is_continuation = self._next_seq > 0
            taken, parts, texts = self._pending(self.MAX_BATCH)
            if parts:
                first = self._next_seq
                self.last_seq = self.store.append(self.run_id, parts, first_seq=first, **self._encoded(texts))
                self._next_seq, self.prefix = self.last_seq + 1, []
                self._wrote(first, texts)
                self._commits_with_caller(self.last_seq)
            self._taken += taken
            return self.last_seq

    def _pending(self, limit: int | None = None) -> tuple[int, list[dict[str, Any]], list[str] | None]:
        """Under the lock, the next seq known: how many of the source's parts are new, the wire parts that
        write them (the prefix first, with the first new parts), and their journal texts (None when the store
        encodes them itself)."""
        new = self.source.parts_from(self._taken) if self.source is not None else []
        if limit is not None:
            new = new[:limit]
        if not new:
            return 0, [], None
        parts = [*self.prefix, *journal_parts(new, is_continuation=bool(self._is_continuation))]
        return len(new), parts, (self._encode(parts) if self._encode is not None else None)

    @staticmethod
    def _encoded(texts: list[str] | None) -> dict[str, Any]:
        return {} if texts is None else {"encoded": texts}

    def _wrote(self, first: int, texts: list[str] | None) -> None:
        """A batch written from ``first`` on (committed or not yet), for the next notification."""
        if texts:
            with self._notes_lock:
                self._written.append((first, texts))

    def _commits_with_caller(self, last: int) -> None:
        """``last`` is committed now, or once the transaction this write ran in (a checkpoint's) commits."""
        if connections[DEFAULT_DB_ALIAS].in_atomic_block:
            transaction.on_commit(lambda: self._commit(last))
        else:
            self._commit(last)

    def _commit(self, last: int) -> None:
        with self._notes_lock:
            self._committed = max(self._committed, last)

    def position(self) -> tuple[Any, ...]:
        """Where the writer stands (what it took from the source, the next seq, its prefix), for ``rewind``."""
        with self._lock:
            return self._taken, self._next_seq, self._is_continuation, self.last_seq, list(self.prefix)

    def rewind(self, position: tuple[Any, ...]) -> None:
        """Back to ``position``: the flushes since were rolled back with the transaction they were in."""
        with self._lock:
            self._taken, self._next_seq, self._is_continuation, self.last_seq, prefix = position
            self.prefix = list(prefix)
            with self._notes_lock:  # those batches were never committed
                self._written = [batch for batch in self._written if batch[0] <= self.last_seq]

    def direct_flush(self, run_pk: int) -> _DirectFlush | None:
        """The parts a direct checkpoint save (runs.stores.direct) must write in its transaction, as its hook's
        work: every part emitted so far. None when it cannot say without the ORM or a wait (a store without
        direct appends, the next seq not known yet, a flush under way on another thread)."""
        append = getattr(self.store, "append_direct", None)
        if append is None or not self._lock.acquire(blocking=False):
            return None
        try:
            if self._next_seq is None and self.source is not None and self.source.parts_count() > self._taken:
                self._lock.release()
                return None
            taken, parts, texts = self._pending()
        except BaseException:
            self._lock.release()
            raise
        return _DirectFlush(self, append, run_pk, parts, texts, taken)

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
            first, texts = self._next_seq, (self._encode(list(last_parts)) if self._encode and last_parts else None)
            last = self.store.append(self.run_id, list(last_parts), end_leg=True, first_seq=first,
                                     **self._encoded(texts))
            if last_parts:
                self.last_seq, self._next_seq = last, last + 1
                self._wrote(first, texts)
                self._commits_with_caller(last)
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
            if not self._flush_direct():
                await sync_to_async(self.flush_sync)()
        await self.notify()

    def _flush_direct(self) -> bool:
        """``flush_sync`` on the event loop's own SQLite connection (runs.stores.direct), sparing the thread hop;
        False when it cannot go there now (nothing written: the caller flushes through a thread)."""
        append = getattr(self.store, "append_direct", None)
        fence = getattr(self.store, "fence", None)
        if append is None or fence is None or not fence.knows_run_pk or self._next_seq is None:
            return False
        if not self._lock.acquire(blocking=False):
            return False
        try:
            taken, parts, texts = self._pending(self.MAX_BATCH)
            if parts:
                first = self._next_seq

                def write(cursor: Any) -> int:
                    return append(cursor, fence.hold_direct(cursor), parts, first_seq=first, **self._encoded(texts))

                try:
                    with connections[DEFAULT_DB_ALIAS].wrap_database_errors:
                        self.last_seq = direct_sqlite.fenced_write(write)
                except DirectUnavailable:
                    return False
                self._next_seq, self.prefix = self.last_seq + 1, []
                self._wrote(first, texts)
                self._commit(self.last_seq)
            self._taken += taken
            return True
        finally:
            self._lock.release()

    async def notify(self, *, end: bool = False) -> None:
        """Wake the run's followers when there is something new: ``seq`` (the last written), the committed parts
        not yet carried (``first`` and their journal ``parts``), and with ``end`` the word that the leg closed
        (its run's status is settled: a follower asks the database again)."""
        with self._notes_lock:
            if self.last_seq <= self._notified and self._committed <= self._sent and not end:
                return
            self._notified = max(self._notified, self.last_seq)
            first, texts = self._committed_texts()
        message: dict[str, Any] = {"type": "journal.appended", "seq": self.last_seq}
        if texts:
            message.update(first=first, parts=texts)
        if end:
            message["end"] = True
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            await layer.group_send(run_stream_group(self.run_id), message)
        except Exception as exc:  # a lost wake-up costs followers latency, never a part: they read the journal
            logger.warning("Waking followers of %s failed: %s", self.run_id, type(exc).__name__)

    def _committed_texts(self) -> tuple[int | None, list[str]]:
        """Under the notes lock: the committed batches not yet carried, as one run of seqs from the first; those
        past the size limit (or after a gap) are passed over, for the followers to read."""
        first: int | None = None
        texts: list[str] = []
        kept: list[tuple[int, list[str]]] = []
        for batch_first, batch in self._written:
            batch_last = batch_first + len(batch) - 1
            if batch_last > self._committed:
                kept.append((batch_first, batch))  # its transaction has not committed yet
                continue
            if batch_last <= self._sent:
                continue
            if first is None:
                first = batch_first
            if batch_first == first + len(texts):
                texts.extend(batch)
            self._sent = max(self._sent, batch_last)
        self._written = kept
        # Nothing committed is left to carry (a store that encodes nothing records no batch): the next notify
        # waits for something new, not one every tick.
        self._sent = max(self._sent, self._committed)
        if first is None or sum(map(len, texts)) > self.NOTIFY_MAX_CHARS:
            return None, []
        return first, texts


class _DirectFlush:
    """A writer's flush inside a direct checkpoint save: it holds the writer's lock from ``direct_flush`` to
    ``done``, and moves the writer's counters only once the transaction committed."""

    __slots__ = ("_append", "_last", "_parts", "_run_pk", "_taken", "_texts", "_writer")

    def __init__(
        self, writer: JournalWriter, append: Any, run_pk: int, parts: list[dict[str, Any]], texts: list[str] | None,
        taken: int,
    ) -> None:
        self._writer, self._append, self._run_pk = writer, append, run_pk
        self._parts, self._texts, self._taken = parts, texts, taken
        self._last: int | None = None

    def write(self, cursor: Any) -> None:
        """The parts, on a direct save's sqlite3 cursor."""
        if self._parts:
            self._last = self._append(cursor, self._run_pk, self._parts, first_seq=self._writer._next_seq,
                                      **self._writer._encoded(self._texts))

    def rows(self) -> list[tuple[Any, ...]]:
        """The parts as journal rows, for a save that writes them in its own statement (PostgreSQL's)."""
        if not self._parts:
            return []
        first = self._writer._next_seq
        rows = self._writer.store.rows_for(self._run_pk, self._parts, first_seq=first,
                                           **self._writer._encoded(self._texts))
        self._last = first + len(rows) - 1
        return rows

    def done(self, committed: bool) -> None:
        writer = self._writer
        try:
            if committed and self._taken:
                if self._last is not None:
                    writer._wrote(writer._next_seq, self._texts)
                    writer._commit(self._last)
                    writer.last_seq, writer._next_seq, writer.prefix = self._last, self._last + 1, []
                writer._taken += self._taken
                writer._skip_tick = True
        finally:
            writer._lock.release()
