"""Fan-out without a cost per follower (issue 25): a part that came with a journal notification is encoded for the
wire once per process, its JSON text shared by every follower of the run that may see it as it is, and a part read
from the journal is sent as the journal's text, read once for every follower that shares the read; a follower
who may not see an approval's token gets a text of its own, without it."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async

import runs.wire.followers
import runs.wire.tails
from runs.models import Run
from runs.stores.streams import DatabaseStreamStateStore
from runs.wire.followers import FrameKind, follow_open, part_json
from runs.wire.groups import run_stream_group
from runs.wire.writer import JournalWriter
from tests.runs.wire.test_live_tail import (  # noqa: F401 (fixtures)
    delta, follow, group_joins, journal_reads, running, until, writer_of,
)

pytestmark = pytest.mark.django_db(transaction=True)

FOLLOWERS = 20


@pytest.fixture
def encodes(monkeypatch):
    """Every encode of a part for the wire in this process (runs.wire.followers.part_json), counted."""
    calls: list[dict] = []

    def counted(part):
        calls.append(part)
        return part_json(part)

    monkeypatch.setattr(runs.wire.followers, "part_json", counted)
    return calls


def _waiting_on_the_tail(run_id: str) -> int:
    """How many followers of ``run_id`` on this event loop have read the journal and wait on its tail."""
    tail = runs.wire.tails._tails.get(asyncio.get_running_loop(), {}).get(run_id)
    return 0 if tail is None else sum(listener.quiet_polls > 0 for listener in tail.listeners)


async def _followers_hear(user_for, parts: list[dict], *, followers: int) -> list[list]:
    """``followers`` followers of r1 (follower n as ``user_for(n)``), all waiting before ``parts`` are written and
    notified one at a time; each follower's frames up to the last part."""
    writer = writer_of()
    frames: list[list] = [[] for _ in range(followers)]
    tasks = [asyncio.create_task(follow(user_for(n), until_seq=len(parts) - 1, frames=mine))
             for n, mine in enumerate(frames)]
    # Every follower has read the (empty) journal, so it waits on the run's tail (their reads may be shared).
    await until(lambda: _waiting_on_the_tail("r1") == followers, seconds=60)
    for part in parts:
        writer.source.parts.append(part)
        await sync_to_async(writer.flush_sync)()
        await writer.notify()
    await asyncio.wait_for(asyncio.gather(*tasks), 20)
    return frames


def test_a_live_part_is_not_encoded_once_per_follower(running, owner, encodes, group_joins):
    parts = [delta("a"), {"type": "tool-result", "toolCallId": "c1", "output": {"rows": [1, 2]}}, delta("é")]
    frames = asyncio.run(_followers_hear(lambda n: owner, parts, followers=FOLLOWERS))
    assert group_joins == [run_stream_group("r1")]
    texts = [[frame.json for frame in mine] for mine in frames]
    assert texts == [[part_json(part) for part in parts]] * FOLLOWERS
    assert encodes == []  # the notification's own texts: no encode in this process, let alone one per follower


def test_every_follower_sends_the_same_text_of_a_live_part(running, owner):
    frames = asyncio.run(_followers_hear(lambda n: owner, [delta("a")], followers=FOLLOWERS))
    first = frames[0][0].json
    assert all(mine[0].json is first for mine in frames)


def test_a_part_read_from_the_journal_is_sent_as_the_journal_holds_it(running, owner, encodes):
    writer = writer_of(delta("before"))
    writer.flush_sync()  # written before the follower came, never notified: its follower reads it from the journal

    async def scenario():
        mine: list = []
        await follow(owner, until_seq=0, frames=mine)
        return mine

    (frame,) = asyncio.run(scenario())
    assert frame.json == part_json(delta("before")) and encodes == []  # the journal's text: not encoded again


def test_a_follower_who_may_not_decide_never_gets_the_shared_text_with_the_token(running, owner, reviewer):
    request = {"type": "tool-approval-request", "approvalId": "a1", "toolCallId": "c1",
               "approval": {"id": "a1", "token": "secret-token-value"}}
    users = [reviewer, owner]
    frames = asyncio.run(_followers_hear(lambda n: users[n % 2], [request], followers=4))
    seen = [json.loads(mine[0].json)["approval"] for mine in frames]
    assert [approval.get("token") for approval in seen] == ["secret-token-value", None] * 2
    assert all("secret-token-value" not in mine[0].json for mine in frames[1::2])


def test_a_tails_kept_texts_go_with_its_parts(running):
    tail = runs.wire.tails.RunTail("r1", layer=None)
    encoded = DatabaseStreamStateStore.encode_parts([delta(str(n)) for n in range(tail.KEEP + 3)])
    tail.heard({"first": 0, "parts": encoded, "seq": len(encoded) - 1})
    assert list(tail.texts) == list(tail.parts) == list(range(3, tail.KEEP + 3))
    assert tail.texts[3] == part_json(delta("3"))


def _the_leg_ends_with(part: dict, owner, *, before_the_end=lambda: None) -> list[list]:
    """FOLLOWERS followers of r1 wait on its tail; then ``part`` is written, the leg ends, the run completes and
    the end is notified (``before_the_end`` runs just before the part is written). Each follower's frames."""
    writer = writer_of()
    frames: list[list] = [[] for _ in range(FOLLOWERS)]

    async def scenario():
        tasks = [asyncio.create_task(follow(owner, frames=mine)) for mine in frames]
        await until(lambda: _waiting_on_the_tail("r1") == FOLLOWERS, seconds=60)
        before_the_end()
        writer.source.parts.append(part)
        await sync_to_async(writer.end_leg_sync)()
        await sync_to_async(Run.objects.filter(run_id="r1").update)(status="completed")
        await writer.notify(end=True)  # every follower must hear the end from the database
        await asyncio.wait_for(asyncio.gather(*tasks), 20)

    asyncio.run(scenario())
    return frames


def test_the_followers_of_a_run_share_their_reads_of_its_end(running, owner, journal_reads):
    frames = _the_leg_ends_with(delta("a"), owner, before_the_end=journal_reads.clear)
    assert all([frame.kind for frame in mine] == [FrameKind.PART, FrameKind.DONE] for mine in frames)
    # Woken by one notification, every follower may share a read begun after it was heard: one of each.
    assert sorted(journal_reads) == [("page", 0), ("state",)]


def test_a_part_the_followers_read_from_the_journal_is_one_text_for_them_all(running, owner, encodes):
    big = delta("x" * (JournalWriter.NOTIFY_MAX_CHARS + 1))  # too big to carry: every follower reads it
    frames = _the_leg_ends_with(big, owner)
    first = frames[0][0].json
    assert first == part_json(big) and all(mine[0].json is first for mine in frames)
    assert encodes == []  # the shared read's journal text, not an encode per follower


async def _follow_slowly(owner, frames: list, pause: float) -> None:
    """Follow r1 as ``follow`` does, but taking ``pause`` seconds over each part, as a busy event loop would."""
    opened = await follow_open(run_id="r1", cursor=None, authenticate=lambda: owner, kind="sse")
    async for frame in opened.frames():
        if frame.kind is not FrameKind.IDLE:
            frames.append(frame)
        if frame.kind is FrameKind.PART:
            await asyncio.sleep(pause)
        if frame.kind is FrameKind.DONE:
            return


def test_followers_who_hear_the_end_one_after_another_share_the_reads_begun_after_it(running, owner, journal_reads):
    writer = writer_of()
    frames: list[list] = [[] for _ in range(5)]

    async def scenario():
        tasks = [asyncio.create_task(_follow_slowly(owner, mine, pause=0.1 * n)) for n, mine in enumerate(frames)]
        await until(lambda: _waiting_on_the_tail("r1") == len(frames), seconds=60)
        journal_reads.clear()
        writer.source.parts.append(delta("a"))
        await sync_to_async(writer.end_leg_sync)()
        await sync_to_async(Run.objects.filter(run_id="r1").update)(status="completed")
        await writer.notify(end=True)
        await asyncio.wait_for(asyncio.gather(*tasks), 20)

    asyncio.run(scenario())
    assert all([frame.kind for frame in mine] == [FrameKind.PART, FrameKind.DONE] for mine in frames)
    # The first follower's reads have returned when the last asks, 0.4 s later: begun after the end was heard,
    # they answer it too.
    assert sorted(journal_reads) == [("page", 0), ("state",)]
