"""The journal and its follower, on the in-memory reference store."""

from __future__ import annotations

import asyncio

import pytest

from runs.runtime.wire import (
    DONE,
    FollowState,
    create_in_memory_stream_state_store,
    follow_journal,
    follow_journal_batches,
    journal_parts,
)
from tests.runs.runtime.scripting import collect


def parts(*texts):
    return [{"type": "text-delta", "text": text} for text in texts]


def test_seqs_are_gapless_from_zero_across_appends():
    store = create_in_memory_stream_state_store()
    store.append("r", parts("a", "b"))
    store.append("r", parts("c"), end_leg=True)
    store.append("r", parts("d"))
    assert [seq for seq, _ in store.read("r").parts] == [0, 1, 2, 3]


def test_reading_after_a_cursor_starts_at_the_next_seq():
    store = create_in_memory_stream_state_store()
    store.append("r", parts("a", "b", "c"))
    assert store.read("r", after=1).parts == [(2, {"type": "text-delta", "text": "c"})]


def test_a_journal_is_closed_only_when_it_ends_with_a_sentinel():
    store = create_in_memory_stream_state_store()
    store.append("r", parts("a"), end_leg=True)
    closed = store.read("r").is_closed
    store.append("r", parts("b"))
    assert (closed, store.read("r").is_closed) == (True, False)


def test_a_page_reports_when_it_was_cut():
    store = create_in_memory_stream_state_store()
    store.append("r", parts(*"abcde"))
    page = store.read("r", limit=2)
    assert (len(page.parts), page.has_more, page.last_seq) == (2, True, 4)


def test_the_store_keeps_a_bounded_number_of_streams():
    store = create_in_memory_stream_state_store(max_streams=2)
    for stream in ("a", "b", "c"):
        store.append(stream, parts("x"))
    assert (len(store), store.read("a").last_seq, store.read("c").last_seq) == (2, -1, 0)


def test_a_continuation_leg_does_not_repeat_the_start_part():
    leg = [{"type": "start", "run_id": "r"}, {"type": "recovery", "restarted_step_index": 1}]
    assert journal_parts(leg, is_continuation=True) == [leg[1]]


class Producer:
    """A fake run for the follower: its journal, its status, and how often it was continued."""

    def __init__(self, *, active=True, gone=False):
        self.store = create_in_memory_stream_state_store()
        self.active, self.gone = active, gone
        self.continued = 0
        self.woken = asyncio.Event()

    async def read(self, after):
        return self.store.read("r", after=after, limit=3)

    async def state(self):
        return FollowState(is_active=self.active, is_producer_gone=self.gone)

    async def wait(self, seconds):
        try:
            await asyncio.wait_for(self.woken.wait(), seconds)
        except TimeoutError:
            pass
        self.woken.clear()

    async def continue_run(self):
        self.continued += 1
        self.gone = False
        self.store.append("r", parts("continued"), end_leg=True)
        self.active = False

    def follow(self, cursor=-1, idle=0.01):
        return follow_journal(read=self.read, state=self.state, wait=self.wait, continue_run=self.continue_run,
                              cursor=cursor, idle_seconds=idle)


@pytest.mark.parametrize("cursor", range(-1, 7))
async def test_replay_of_a_finished_run_from_every_cursor(cursor):
    producer = Producer(active=False)
    producer.store.append("r", parts(*"abcdefg"), end_leg=True)
    items = await collect(producer.follow(cursor))
    assert items[-1] == DONE and [seq for seq, _ in items[:-1]] == list(range(cursor + 1, 7))


async def test_the_follower_tails_a_live_producer():
    producer = Producer()
    producer.store.append("r", parts("a"))
    seen = []

    async def follow():
        async for item in producer.follow(idle=5):
            seen.append(item)

    task = asyncio.create_task(follow())
    await asyncio.sleep(0.01)
    producer.store.append("r", parts("b", "c"), end_leg=True)
    producer.active = False
    producer.woken.set()
    await asyncio.wait_for(task, 2)
    assert seen == [(0, parts("a")[0]), (1, parts("b")[0]), (2, parts("c")[0]), DONE]


async def test_a_lost_notification_costs_latency_not_a_part():
    producer = Producer()

    async def append_silently():
        await asyncio.sleep(0.02)
        producer.store.append("r", parts("late"), end_leg=True)  # no wake-up sent
        producer.active = False

    asyncio.get_running_loop().create_task(append_silently())
    items = await asyncio.wait_for(collect(producer.follow(idle=0.01)), 2)
    assert items == [(0, parts("late")[0]), DONE]


async def test_a_dead_producer_is_continued_and_the_follower_keeps_tailing():
    producer = Producer(gone=True)
    producer.store.append("r", parts("before"))
    items = await asyncio.wait_for(collect(producer.follow()), 2)
    assert (producer.continued, [part["text"] for _, part in items[:-1]], items[-1]) == (1, ["before", "continued"], DONE)


async def test_a_queued_leg_keeps_the_follower_tailing_past_a_sentinel():
    producer = Producer(active=True)
    producer.store.append("r", parts("suspended"), end_leg=True)

    async def verdict_leg():
        await asyncio.sleep(0.03)
        producer.store.append("r", parts("after the verdict"), end_leg=True)
        producer.active = False

    asyncio.get_running_loop().create_task(verdict_leg())
    items = await asyncio.wait_for(collect(producer.follow()), 2)
    assert [part["text"] for _, part in items[:-1]] == ["suspended", "after the verdict"]


async def test_parts_known_without_asking_are_yielded_before_the_producers_state_is_asked():
    producer = Producer()
    producer.store.append("r", parts("a", "b"))
    asked: list[str] = []

    async def state():
        asked.append("state")
        return FollowState(is_active=False, is_producer_gone=False)

    def carried(after):
        asked.append(f"carried after {after}")
        return producer.store.read("r", after=after).parts

    items = await collect(follow_journal(read=producer.read, state=state, wait=producer.wait,
                                         continue_run=producer.continue_run, carried=carried))
    assert asked == ["carried after -1", "state"]
    assert items == [(0, parts("a")[0]), (1, parts("b")[0]), DONE]


async def test_what_is_known_at_once_comes_in_one_batch_a_finished_runs_page_with_its_done():
    producer = Producer(active=False)
    producer.store.append("r", parts(*"abcde"), end_leg=True)
    batches = await collect(follow_journal_batches(read=producer.read, state=producer.state, wait=producer.wait,
                                                   continue_run=producer.continue_run))
    # Pages of 3 (Producer.read): the first page alone, the last with the end of the turn.
    assert [[item if item == DONE else item[0] for item in batch] for batch in batches] == [[0, 1, 2], [3, 4, DONE]]


async def test_a_notifications_carried_parts_come_in_one_batch():
    producer = Producer()
    producer.store.append("r", parts("a", "b", "c"))
    batches = follow_journal_batches(read=producer.read, state=producer.state, wait=producer.wait,
                                     continue_run=producer.continue_run,
                                     carried=lambda after: producer.store.read("r", after=after).parts)
    first = await anext(batches)
    await batches.aclose()
    assert [seq for seq, _ in first] == [0, 1, 2]
