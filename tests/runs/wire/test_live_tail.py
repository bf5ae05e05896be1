"""The live tail (issue 8, item 5): a journal notification carries the parts its writer committed, so a live
follower reads the journal only to start, to fill a gap and to end its turn; the followers of a run in one
process share one place in its Channels group."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connections, transaction
from django.utils import timezone

import runs.wire.followers
from runs.models import Run
from runs.stores.streams import DatabaseStreamStateStore, part_decode
from runs.wire.followers import FrameKind, follow_open
from runs.wire.groups import run_stream_group
from runs.wire.writer import JournalWriter
from tests.factories import make_run
from tests.runs.stores.test_db_store import _PartLog

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(owner):
    """A run a live worker holds (epoch 3, its lease far from lapsing): followers tail it and never continue it."""
    return make_run("r1", owner_epoch=3, lease_expires_at=timezone.now() + timedelta(hours=1), created_by=owner)


def delta(text: str) -> dict:
    return {"type": "text-delta", "text": text}


def writer_of(*parts: dict) -> JournalWriter:
    writer = JournalWriter(run_id="r1", epoch=3)
    writer.source = _PartLog(parts)
    return writer


def notification_of(writer: JournalWriter) -> dict:
    """The message ``writer.notify()`` sends to the run's group, as a member of it receives it."""

    async def roundtrip():
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(run_stream_group("r1"), channel)
        try:
            await writer.notify()
            return await asyncio.wait_for(layer.receive(channel), 5)
        finally:
            await layer.group_discard(run_stream_group("r1"), channel)

    return asyncio.run(roundtrip())


@pytest.fixture(autouse=True)
def closed_connections():
    """The ORM thread's connection closed after each scenario (an open one keeps the test database from being
    dropped)."""
    yield
    asyncio.run(sync_to_async(connections.close_all)())


def test_a_notification_carries_the_committed_parts_as_the_journal_holds_them(running):
    writer = writer_of(delta("a"), {"type": "tool-result", "toolCallId": "c1", "output": {"ok": True}})
    writer.flush_sync()
    message = notification_of(writer)
    journal = DatabaseStreamStateStore().read_sync("r1")
    assert message["first"] == 0 and message["seq"] == 1
    assert [(message["first"] + n, part_decode(text)) for n, text in enumerate(message["parts"])] == journal.parts


def test_parts_written_inside_a_checkpoints_transaction_wait_for_its_commit(running):
    writer = writer_of(delta("a"))
    with transaction.atomic():
        writer.flush_sync()  # as the checkpoint's hook flushes: not committed yet
        before_commit = notification_of(writer)
    after_commit = notification_of(writer)
    assert "parts" not in before_commit and before_commit["seq"] == 0
    assert [part_decode(text) for text in after_commit["parts"]] == [delta("a")]


def test_parts_of_a_transaction_rolled_back_are_never_carried(running):
    writer = writer_of(delta("a"))
    position = writer.position()
    with pytest.raises(RuntimeError), transaction.atomic():
        writer.flush_sync()
        raise RuntimeError("the checkpoint's save failed")
    writer.rewind(position)  # as the save hook does after a rollback
    writer.source.parts[0] = delta("b")
    writer.flush_sync()
    assert [part_decode(text) for text in notification_of(writer)["parts"]] == [delta("b")]


def test_parts_over_the_size_limit_are_left_to_the_journal(running, monkeypatch):
    monkeypatch.setattr(JournalWriter, "NOTIFY_MAX_CHARS", 10)
    writer = writer_of(delta("a long answer, longer than ten characters"))
    writer.flush_sync()
    message = notification_of(writer)
    assert message["seq"] == 0 and "parts" not in message


@pytest.fixture
def journal_reads(monkeypatch):
    """The followers' reads of the database, each once it has returned: ``("page", after)`` for a page of the
    journal, ``("state",)`` for where the run stands."""
    calls = []
    read_page, follow_state = runs.wire.followers._read_page, runs.wire.followers._follow_state

    # Counted once the read has returned, so a scenario that waits for a count knows the read is over (a part
    # appended while the follower's first page is still being read would be in that page, not a gap).
    def counted_page(run_id, after):
        page = read_page(run_id, after)
        calls.append(("page", after))
        return page

    def counted_state(run_id):
        state = follow_state(run_id)
        calls.append(("state",))
        return state

    monkeypatch.setattr(runs.wire.followers, "_read_page", counted_page)
    monkeypatch.setattr(runs.wire.followers, "_follow_state", counted_state)
    return calls


async def follow(owner, *, until_seq: int | None = None, frames: list) -> None:
    """Follow r1 as its owner, collecting frames, until ``until_seq`` is seen (or the turn's end)."""
    opened = await follow_open(run_id="r1", cursor=None, authenticate=lambda: owner, kind="sse")
    async for frame in opened.frames():
        if frame.kind is FrameKind.IDLE:
            continue
        frames.append(frame)
        if frame.kind is FrameKind.DONE or (until_seq is not None and frame.seq == until_seq):
            return


async def until(condition, seconds: float = 10) -> None:
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


def test_a_live_follower_reads_the_journal_to_start_and_takes_the_parts_from_the_notifications(
    running, owner, journal_reads
):
    writer = writer_of()
    frames: list = []

    async def scenario():
        follower = asyncio.create_task(follow(owner, until_seq=4, frames=frames))
        await until(lambda: len(journal_reads) == 2)  # where the run stands, and its journal: nothing yet
        for n in range(5):
            writer.source.parts.append(delta(str(n)))
            await sync_to_async(writer.flush_sync)()
            await writer.notify()
            await until(lambda: len(frames) > n)
        await follower

    asyncio.run(scenario())
    assert [(frame.seq, frame.part) for frame in frames] == [(n, delta(str(n))) for n in range(5)]
    assert journal_reads == [("state",), ("page", -1)]


def test_a_follower_fills_a_gap_in_the_notified_parts_from_the_journal(running, owner, journal_reads):
    writer = writer_of()
    frames: list = []

    async def scenario():
        follower = asyncio.create_task(follow(owner, until_seq=2, frames=frames))
        await until(lambda: len(journal_reads) == 2)
        # Seqs 0 and 1 are written with their notification lost; seq 2's comes.
        await sync_to_async(DatabaseStreamStateStore().fenced("r1", 3).append_sync)("r1", [delta("0"), delta("1")])
        writer.source.parts.append(delta("2"))
        await sync_to_async(writer.flush_sync)()
        await writer.notify()
        await asyncio.wait_for(follower, 10)

    asyncio.run(scenario())
    assert [(frame.seq, frame.part) for frame in frames] == [(0, delta("0")), (1, delta("1")), (2, delta("2"))]
    assert journal_reads == [("state",), ("page", -1), ("page", -1)]  # the gap: seq 0 was not in the notification


def test_the_turn_ends_on_the_databases_word_when_the_leg_says_it_ended(running, owner, journal_reads):
    writer = writer_of(delta("a"))
    frames: list = []

    async def scenario():
        follower = asyncio.create_task(follow(owner, frames=frames))
        await until(lambda: len(journal_reads) == 2)
        await sync_to_async(writer.end_leg_sync)()
        await sync_to_async(Run.objects.filter(run_id="r1").update)(status="completed")
        await writer.notify(end=True)
        await asyncio.wait_for(follower, 5)  # long before the follower's next poll

    asyncio.run(scenario())
    assert [frame.kind for frame in frames] == [FrameKind.PART, FrameKind.DONE]
    # The leg's last part came with its notification and was sent before the database was asked (the last page
    # is read after it, from seq 0); the end is the database's word, and the last page the journal's, after it
    # said the run completed.
    assert journal_reads == [("state",), ("page", -1), ("state",), ("page", 0)]


@pytest.fixture
def group_joins(monkeypatch):
    """The groups this process's channel layer was asked to add a channel to, in order."""
    layer = get_channel_layer()
    added: list[str] = []
    group_add = layer.group_add

    async def counted(group, channel):
        added.append(group)
        return await group_add(group, channel)

    monkeypatch.setattr(layer, "group_add", counted)
    return added


def test_the_followers_of_a_run_in_one_process_share_one_member_of_its_group(running, owner, group_joins):
    added = group_joins
    writer = writer_of()
    frames: list[list] = [[], [], []]

    async def scenario():
        followers = [asyncio.create_task(follow(owner, until_seq=0, frames=mine)) for mine in frames]
        await until(lambda: len(added) == 1)
        await asyncio.sleep(0.2)  # the three are waiting
        writer.source.parts.append(delta("a"))
        await sync_to_async(writer.flush_sync)()
        await writer.notify()
        await asyncio.wait_for(asyncio.gather(*followers), 10)

    asyncio.run(scenario())
    assert added == [run_stream_group("r1")]
    assert [[(frame.seq, frame.part) for frame in mine] for mine in frames] == [[(0, delta("a"))]] * 3


def test_a_writer_with_nothing_new_sends_no_notification(running, monkeypatch):
    sent = []

    class Layer:
        async def group_send(self, group, message):
            sent.append(message)

    import runs.wire.writer

    monkeypatch.setattr(runs.wire.writer, "get_channel_layer", lambda: Layer())
    writer = writer_of(delta("a"))
    writer._encode = None  # a store that encodes nothing apart: the notifications carry no parts
    writer.flush_sync()
    asyncio.run(writer.notify())
    asyncio.run(writer.notify())  # nothing new since
    assert [message["seq"] for message in sent] == [0]
