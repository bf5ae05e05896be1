"""The resumable wire: a journal of stream parts with gapless sequence numbers, and its follower.

Every part a run emits is appended to its journal with the next seq (from 0, across every leg). Each leg
ends with a terminal sentinel, also when it failed; only a killed process leaves the journal open. A
follower replays from its cursor, tails a live producer, and asks for the run to be continued when the
producer is gone. The same follower logic serves Server-Sent Events, WebSockets and tests.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .exceptions import OwnershipLostError
from .stores import resolve
from .types import StreamPart

__all__ = [
    "DONE",
    "FollowState",
    "IDLE",
    "InMemoryStreamStateStore",
    "JournalPage",
    "OwnedStreamStateStore",
    "StreamStateStore",
    "create_in_memory_stream_state_store",
    "follow_journal",
    "follow_journal_batches",
    "journal_parts",
]

#: Yielded by ``follow_journal`` at the end of a turn (the SSE ``data: [DONE]``).
DONE = "[DONE]"
#: Yielded after each idle wait when asked, so a transport can send keep-alives and notice a gone client.
IDLE = "[IDLE]"


@dataclass(frozen=True)
class JournalPage:
    """Parts after a cursor, and where the journal stands."""

    parts: list[tuple[int, StreamPart]]
    last_seq: int  # -1 for an empty journal
    is_closed: bool  # the journal ends with a terminal sentinel: no producer is writing
    has_more: bool = False  # the page was cut at its limit


@runtime_checkable
class StreamStateStore(Protocol):
    """Where journals live. Methods may be sync or async."""

    def append(self, stream_id: str, parts: Sequence[StreamPart], *, end_leg: bool = False) -> Any:
        """Append ``parts`` with the next seqs; with ``end_leg``, then a terminal sentinel. Returns the last seq."""

    def read(self, stream_id: str, *, after: int = -1, limit: int = 1000) -> Any:
        """A JournalPage of the parts with seq > ``after``."""


@runtime_checkable
class OwnedStreamStateStore(StreamStateStore, Protocol):
    """The contract a worker's journal writer uses: a view fenced to an owner epoch (a stale owner's append
    raises ``OwnershipLostError``), the last seq, and appends at a seq the writer already counted."""

    def fenced(self, stream_id: str, epoch: int) -> OwnedStreamStateStore: ...

    def last_seq(self, stream_id: str) -> Any:
        """The seq of the journal's last part; -1 when it has none."""

    def append(
        self, stream_id: str, parts: Sequence[StreamPart], *, end_leg: bool = False, first_seq: int | None = None
    ) -> Any:
        """As StreamStateStore.append; ``first_seq`` is the seq the caller counted for the first part."""


@dataclass
class _Journal:
    parts: list[StreamPart] = field(default_factory=list)
    sentinel_at: int | None = None  # the last seq when the latest sentinel was written


class InMemoryStreamStateStore:
    """The reference journal store, keeping the ``max_streams`` most recently written journals, with owner
    epochs kept in memory (``claim``)."""

    def __init__(self, *, max_streams: int = 1000) -> None:
        if max_streams < 1:
            raise ValueError("max_streams must be at least 1.")
        self.max_streams = max_streams
        self._journals: OrderedDict[str, _Journal] = OrderedDict()
        self._owners: dict[str, int] = {}
        self.fence: tuple[str, int] | None = None

    def claim(self, stream_id: str) -> int:
        """Take ``stream_id`` over: its owner epoch goes up by one, so older fenced views are refused."""
        self._owners[stream_id] = self._owners.get(stream_id, 0) + 1
        return self._owners[stream_id]

    def fenced(self, stream_id: str, epoch: int) -> InMemoryStreamStateStore:
        view = InMemoryStreamStateStore.__new__(InMemoryStreamStateStore)
        view.max_streams, view._journals, view._owners = self.max_streams, self._journals, self._owners
        view.fence = (stream_id, epoch)
        return view

    def append(
        self, stream_id: str, parts: Sequence[StreamPart], *, end_leg: bool = False, first_seq: int | None = None
    ) -> int:
        if self.fence is not None:
            fenced_id, epoch = self.fence
            if fenced_id != stream_id:
                raise ValueError(f"This journal store is fenced to {fenced_id!r}, not {stream_id!r}.")
            if self._owners.get(stream_id, 0) != epoch:
                raise OwnershipLostError(f"Stream {stream_id!r} is no longer owned by epoch {epoch}.")
        journal = self._journals.pop(stream_id, None) or _Journal()
        self._journals[stream_id] = journal  # most recently written last
        while len(self._journals) > self.max_streams:
            self._journals.popitem(last=False)
        if first_seq is not None and first_seq != len(journal.parts):
            raise ValueError(f"The next seq of {stream_id!r} is {len(journal.parts)}, not {first_seq}.")
        journal.parts.extend(parts)
        if end_leg:
            journal.sentinel_at = len(journal.parts) - 1
        return len(journal.parts) - 1

    def last_seq(self, stream_id: str) -> int:
        journal = self._journals.get(stream_id)
        return len(journal.parts) - 1 if journal is not None else -1

    def read(self, stream_id: str, *, after: int = -1, limit: int = 1000) -> JournalPage:
        journal = self._journals.get(stream_id) or _Journal()
        start = max(after + 1, 0)
        chunk = journal.parts[start : start + limit]
        last = len(journal.parts) - 1
        return JournalPage(
            parts=[(start + offset, part) for offset, part in enumerate(chunk)],
            last_seq=last,
            is_closed=journal.sentinel_at is not None and journal.sentinel_at == last,
            has_more=start + len(chunk) <= last,
        )

    def __len__(self) -> int:
        return len(self._journals)


def create_in_memory_stream_state_store(*, max_streams: int = 1000) -> InMemoryStreamStateStore:
    return InMemoryStreamStateStore(max_streams=max_streams)


def journal_parts(parts: Sequence[StreamPart], *, is_continuation: bool) -> list[StreamPart]:
    """What a leg writes: a continuation leg does not repeat the run's ``start`` part."""
    if not is_continuation:
        return list(parts)
    return [part for part in parts if part.get("type") != "start"]


@dataclass(frozen=True)
class FollowState:
    """What a follower needs to know about the producer besides the journal."""

    is_active: bool  # a leg is queued or running (it will write more)
    is_producer_gone: bool  # a leg was running, its lease lapsed, and it wrote no sentinel


async def follow_journal(
    *,
    read: Callable[[int], Awaitable[JournalPage]],
    state: Callable[[], Awaitable[FollowState]],
    wait: Callable[[float], Awaitable[None]],
    continue_run: Callable[[], Awaitable[Any]],
    cursor: int = -1,
    idle_seconds: float = 1.0,
    yield_idle: bool = False,
    carried: Callable[[int], Sequence[tuple[int, StreamPart]]] | None = None,
) -> AsyncIterator[tuple[int, StreamPart] | str]:
    """Replay from ``cursor``, tail the live producer, and get a dead run continued; ends with DONE.

    ``read(after)`` is the journal (the truth); ``wait`` is woken by live notifications, and a lost one only
    costs ``idle_seconds`` of latency, never a part, because every wake-up reads the journal again.
    ``continue_run`` must claim the run the way a worker does, so any number of followers start at most one
    continuation. ``carried(after)``, when given, answers at once the journal's parts after ``after`` that are
    known without asking (committed parts a notification carried, in an unbroken run of seqs): they are yielded
    before the producer's state is asked, so the last parts of a leg do not wait for the reads that end it.
    """
    async for batch in follow_journal_batches(read=read, state=state, wait=wait, continue_run=continue_run,
                                              cursor=cursor, idle_seconds=idle_seconds, yield_idle=yield_idle,
                                              carried=carried):
        for item in batch:
            yield item


async def follow_journal_batches(
    *,
    read: Callable[[int], Awaitable[JournalPage]],
    state: Callable[[], Awaitable[FollowState]],
    wait: Callable[[float], Awaitable[None]],
    continue_run: Callable[[], Awaitable[Any]],
    cursor: int = -1,
    idle_seconds: float = 1.0,
    yield_idle: bool = False,
    carried: Callable[[int], Sequence[tuple[int, StreamPart]]] | None = None,
) -> AsyncIterator[list[tuple[int, StreamPart] | str]]:
    """``follow_journal``'s items in lists, each list what is known at once (a notification's carried parts, a
    page of the journal, with DONE when the turn ended), so a transport can send it in one write."""
    while True:
        if carried is not None and (known := list(carried(cursor))):
            yield known
            cursor = known[-1][0]
        # The producer's state first, then the journal: whatever it wrote before it stopped is in the pages.
        producer = await state()
        while True:
            page = await read(cursor)
            batch: list[tuple[int, StreamPart] | str] = list(page.parts)
            if page.parts:
                cursor = page.parts[-1][0]
            if page.has_more:
                if batch:
                    yield batch
                continue
            if not producer.is_active:
                # No leg is queued or running: the turn ended (with its sentinel, unless a leg died after its last
                # durable write, where nothing will ever follow).
                yield [*batch, DONE]
                return
            if batch:
                yield batch
            break
        if producer.is_producer_gone:
            await continue_run()
        await wait(idle_seconds)
        if yield_idle:
            yield [IDLE]


async def read_page(store: StreamStateStore, stream_id: str, after: int, limit: int = 1000) -> JournalPage:
    return await resolve(store.read(stream_id, after=after, limit=limit))


async def sleep_wait(seconds: float) -> None:
    await asyncio.sleep(seconds)
