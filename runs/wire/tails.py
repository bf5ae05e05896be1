"""A run's live notifications in a web process: one channel in the run's group for all its followers on an event
loop (``RunTail``), and each follower's wake-ups from it (``Listener``): what the notifications carried, whether
the run is known to be running without asking the database, and when a follower must ask it.

A watched owner's death (runs.ownership.liveness) wakes every follower of this process, so a dead run is
continued at once rather than at a follower's next poll.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any

from channels.layers import get_channel_layer

from runs.ownership.liveness import liveness_on_death
from runs.runtime.types import StreamPart
from runs.runtime.wire import FollowState, JournalPage
from runs.stores.streams import part_decode_plain
from runs.wire.groups import run_stream_group

__all__ = ["Listener", "RunTail"]

logger = logging.getLogger("deuz.followers")


def _owners_died(worker_id: str) -> None:
    """A watched owner died (runs.ownership.liveness, on the watch's thread): every follower of this process that
    waits on its run's tail asks where its run stands now."""
    for ref in list(_tails.data):
        loop = ref()
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(_wake_listeners, loop)
            except RuntimeError:  # closed meanwhile
                pass


def _wake_listeners(loop: asyncio.AbstractEventLoop) -> None:
    for tail in list(_tails.get(loop, {}).values()):
        for listener in tail.listeners:
            listener.asked_at = tail.messages  # what the tail heard says nothing of the death: the database must
            listener.woken.set()


liveness_on_death(_owners_died)


class RunTail:
    """One run's live notifications in this process: one channel in the run's group for every follower of the
    run on this event loop (500 followers of a run cost one receive and one decode a notification, not 500),
    the parts the notifications carried (the last ``KEEP``), and the followers to wake."""

    KEEP = 2000

    def __init__(self, run_id: str, layer: Any) -> None:
        self.run_id = run_id
        self.layer = layer
        self.channel: str | None = None
        self.listeners: set[Listener] = set()
        self.parts: dict[int, StreamPart] = {}  # seq -> part, in the order they came
        self.texts: dict[int, str] = {}  # seq -> the part's JSON as the notification carried it (unsealed)
        self.heard_seq = -1  # the highest seq a notification named
        self.messages = 0  # notifications received
        self.heard_at = 0.0  # time.monotonic() when the last one was heard
        self.ended_at = -1  # ``messages`` when a leg's end was last heard
        self.opened: asyncio.Task[None] | None = None
        self.receiving: asyncio.Task[None] | None = None

    async def open(self) -> None:
        try:
            self.channel = await self.layer.new_channel()
            await self.layer.group_add(run_stream_group(self.run_id), self.channel)
        except Exception as exc:  # no live push: the poll still finds every part
            logger.warning("Live push unavailable for %s: %s", self.run_id, type(exc).__name__)
            self.channel = None
            return
        self.receiving = asyncio.get_running_loop().create_task(self._receive())

    async def close(self) -> None:
        if self.receiving is not None:
            self.receiving.cancel()
        if self.channel is not None:
            try:
                await self.layer.group_discard(run_stream_group(self.run_id), self.channel)
            except Exception:  # the group entry expires on its own
                pass

    async def _receive(self) -> None:
        failures = 0
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broken layer: followers poll meanwhile
                failures += 1
                if failures == 1:
                    logger.warning("Live push for %s failed: %s", self.run_id, type(exc).__name__)
                await asyncio.sleep(min(5.0, 0.1 * 2**failures))
                continue
            failures = 0
            self.heard(message)

    def heard(self, message: dict[str, Any]) -> None:
        """A journal notification (runs.wire.writer.JournalWriter.notify): keep its parts, wake the followers."""
        self.messages += 1
        self.heard_at = time.monotonic()
        first, texts = message.get("first"), message.get("parts")
        if isinstance(first, int) and isinstance(texts, list):
            for offset, text in enumerate(texts):
                try:
                    # The journal's text (runs.stores.streams.encode_parts): the part's JSON, sealed when keys
                    # are set; decoded once here for every follower, and its plain text kept for their wire.
                    part, plain = part_decode_plain(text)
                except Exception:  # not one of ours, or keys that differ: the follower reads the journal instead
                    logger.warning("A notification of %s carried a part that does not decode.", self.run_id)
                    break
                self.parts[first + offset], self.texts[first + offset] = part, plain
            while len(self.parts) > self.KEEP:
                oldest = next(iter(self.parts))
                del self.parts[oldest]
                self.texts.pop(oldest, None)
        if isinstance(message.get("seq"), int):
            self.heard_seq = max(self.heard_seq, message["seq"])
        if message.get("end"):
            self.ended_at = self.messages
        for listener in self.listeners:
            listener.woken.set()


# This process's run tails, per event loop (tests run several loops) and run.
_tails: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, RunTail]] = weakref.WeakKeyDictionary()


async def _tail_join(listener: Listener) -> RunTail | None:
    layer = get_channel_layer()
    if layer is None:
        return None
    tails = _tails.setdefault(asyncio.get_running_loop(), {})
    tail = tails.get(listener.run_id)
    if tail is None:
        tail = tails[listener.run_id] = RunTail(listener.run_id, layer)
        tail.opened = asyncio.get_running_loop().create_task(tail.open())
    tail.listeners.add(listener)
    try:
        await asyncio.shield(tail.opened)
    except BaseException:
        await _tail_leave(listener, tail)
        raise
    if tail.channel is None and tails.get(listener.run_id) is tail:
        del tails[listener.run_id]  # the next follower tries the layer again
    return tail


async def _tail_leave(listener: Listener, tail: RunTail) -> None:
    tail.listeners.discard(listener)
    if tail.listeners:
        return
    tails = _tails.get(asyncio.get_running_loop(), {})
    if tails.get(tail.run_id) is tail:
        del tails[tail.run_id]
    await tail.close()


_ACTIVE = FollowState(is_active=True, is_producer_gone=False)


class Listener:
    """One follower's wake-ups from its run's tail (``RunTail``); without a working layer the follower polls the
    journal.

    The poll is a safety net for lost notifications, and 500 followers polling every second keep a web
    process busy; so with live push working it comes every ``MAX_POLL_SECONDS``, and without it a quiet run
    is polled less and less often (up to every ``MAX_POLL_SECONDS``), and again every second from the moment
    a notification or a part arrives.

    A notification heard since the follower last asked where the run stands says it at once: its producer
    has just written, so it is running and alive (``live_state``), and the parts it carried are read from
    the tail (``live_page``). Anything else (the first look, a quiet poll, the end of a leg, a gap in the
    carried parts) asks the database, so a follower ends its turn only on the database's word.
    """

    MAX_POLL_SECONDS = 5.0
    BACKOFF = 1.5

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.tail: RunTail | None = None
        self.woken = asyncio.Event()
        self.quiet_polls = 0
        self.asked_at = 0  # the tail's ``messages`` when the follower last asked where the run stands
        # When the notifications that were news at that ask were heard (None: there were none): a read begun
        # since has seen what they said (runs.wire.reads), so the follower may share it.
        self.news_at: float | None = None
        self.trusts_tail = False  # the last answer came from the tail: so may the reads after it

    def heard(self) -> None:
        """Something happened: poll often again."""
        self.quiet_polls = 0

    def next_wait(self, seconds: float) -> float:
        if self.tail is not None and self.tail.channel is not None:
            # Live push works: the poll is only the net for a notification lost with a Redis connection, and for
            # a producer that died (its lease takes longer than this to lapse). 500 followers polling every
            # second while their runs were queued kept the process's database threads a few seconds behind.
            return max(seconds, self.MAX_POLL_SECONDS)
        return min(seconds * self.BACKOFF**self.quiet_polls, max(seconds, self.MAX_POLL_SECONDS))

    async def __aenter__(self) -> Listener:
        self.tail = await _tail_join(self)
        if self.tail is not None:
            self.asked_at = self.tail.messages  # what the tail heard before this follower came says nothing new
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.tail is not None:
            await _tail_leave(self, self.tail)

    def live_state(self) -> FollowState | None:
        """Running and alive, when a notification other than a leg's end came since the last ask; else None."""
        tail = self.tail
        if tail is None or tail.channel is None:
            self.trusts_tail, self.news_at = False, None
            return None
        asked, self.asked_at = self.asked_at, tail.messages
        self.news_at = tail.heard_at if tail.messages > asked else None
        self.trusts_tail = tail.messages > asked and tail.ended_at <= asked
        return _ACTIVE if self.trusts_tail else None

    def shared_json(self, seq: int, part: StreamPart) -> str | None:
        """The JSON text of ``part`` shared by this process's followers when it is the part the tail holds for
        ``seq`` (it came with a notification); None when it came from a read of the journal."""
        tail = self.tail
        if tail is None or tail.parts.get(seq) is not part:
            return None
        return tail.texts.get(seq)

    def carried(self, after: int) -> list[tuple[int, StreamPart]]:
        """The parts after ``after`` the tail's notifications carried, in an unbroken run of seqs (maybe none):
        committed journal rows, whatever the run's state, so a follower sends them before it asks the database
        where the run stands (at a leg's end every follower asks, and its last parts waited for that)."""
        tail = self.tail
        if tail is None:
            return []
        parts = []
        seq = after + 1
        while seq <= tail.heard_seq and (part := tail.parts.get(seq)) is not None:
            parts.append((seq, part))
            seq += 1
        return parts

    def live_page(self, after: int) -> JournalPage | None:
        """The parts after ``after`` from the tail, in an unbroken run of seqs; None when the journal must say."""
        tail = self.tail
        if not self.trusts_tail or tail is None:
            return None
        if tail.heard_seq <= after:
            return JournalPage(parts=[], last_seq=tail.heard_seq, is_closed=False)
        parts = self.carried(after)
        if not parts:
            return None
        return JournalPage(parts=parts, last_seq=parts[-1][0], is_closed=False)

    async def wait(self, seconds: float) -> None:
        """Until a journal notification or the next poll; either way the caller reads the journal again."""
        delay = self.next_wait(seconds)
        self.quiet_polls += 1
        if self.tail is None or self.tail.channel is None:
            await asyncio.sleep(delay)
            return
        try:
            await asyncio.wait_for(self.woken.wait(), delay)
        except TimeoutError:
            return
        self.woken.clear()
        self.heard()
