"""What a follower costs (issue 12): a bounded set of database connections for any number of followers,
every handle given back when they go, a cap on streams per user, and failures that end in one redacted part.

The streams run through the project's ASGI application on an event loop of their own thread, as under
daphne: each request's synchronous calls then run in a thread of the request's own, which is how open
streams once held a connection each.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import DataError, OperationalError, connection

from runs.models import Run
from runs.stores.streams import DatabaseStreamStateStore
from runs.wire.followers import follow_open
from runs.wire.reads import FollowerReads
from tests.factories import make_run, make_user
from tests.processes import database_handles, wait_until
from tests.streams import SseStream, parse_sse, token_header, ws_follow, ws_frames

pytestmark = pytest.mark.django_db(transaction=True)

# The followers' shared database threads, the test's own connections, and on SQLite one direct connection per
# event loop thread that saves checkpoints (runs.stores.direct): a bound that does not grow with followers.
MAX_HANDLES = 12


def like_daphne(scenario):
    """Run ``scenario()`` on an event loop in a thread of its own, with no synchronous caller to fall back to."""
    outcome: dict = {}

    def main():
        try:
            outcome["value"] = asyncio.run(scenario())
        except BaseException as exc:  # noqa: BLE001 (re-raised in the test's thread)
            outcome["error"] = exc

    thread = threading.Thread(target=main)
    thread.start()
    thread.join(timeout=110)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def queued_run(run_id: str, user) -> Run:
    """A run no worker takes here: its followers tail it until it is closed."""
    return make_run(run_id, status=Run.Status.QUEUED, created_by=user)


@pytest.fixture
def followers():
    """Three users with a queued run each, and the request headers of 20 streams per user (the default cap)."""
    users = [make_user(f"tail-{n}") for n in range(3)]
    for user in users:
        queued_run(f"tail-{user.username}", user)
    return [(f"/api/runs/tail-{user.username}/events/", [token_header(user)]) for user in users for _ in range(20)]


def _sixty_streams(followers, *, while_open):
    """Open every stream, append a part to each run and wait until every stream has it (so all of them are
    reading), sampling the database handles all along; then ``while_open()``, then close them all."""

    async def scenario():
        streams = [SseStream(path, headers=headers) for path, headers in followers]
        statuses = await asyncio.gather(*(stream.open() for stream in streams))
        await sync_to_async(_append_to_every_run, thread_sensitive=False)()
        reading = asyncio.gather(*(stream.read_until("id: 0") for stream in streams))
        peak = 0
        while not reading.done():
            peak = max(peak, await sync_to_async(_sample, thread_sensitive=False)())
            await asyncio.sleep(0.05)
        await reading
        during = await sync_to_async(while_open, thread_sensitive=False)()
        await asyncio.gather(*(stream.close() for stream in streams))
        return statuses, peak, during

    return like_daphne(scenario)


def _sample() -> int:
    try:
        return database_handles()
    finally:
        connection.close()  # the sampler is no follower: its own connection must not stay behind


def _append_to_every_run() -> None:
    try:
        for run_id in Run.objects.values_list("run_id", flat=True):
            DatabaseStreamStateStore().append_sync(run_id, [{"type": "text-delta", "text": "hello"}])
    finally:
        connection.close()  # this thread is not a follower's: its handle must not count


def test_a_stream_sends_its_first_bytes_before_the_run_s_first_part():
    # daphne sends the status line with the first body bytes: without them a client waits for a part.
    user = make_user("early")
    queued_run("quiet", user)
    headers = [token_header(user)]

    async def scenario():
        stream = SseStream("/api/runs/quiet/events/", headers=headers)
        await stream.open()
        message = await stream.communicator.receive_output(timeout=5)
        await stream.close()
        return message["body"]

    assert like_daphne(scenario) == b"retry: 1000\n: following\n\n"


def test_sixty_followers_share_a_few_database_connections(followers):
    statuses, peak, _ = _sixty_streams(followers, while_open=lambda: None)
    assert statuses == [200] * 60
    assert peak <= MAX_HANDLES, f"{peak} database handles for 60 followers"


def test_the_api_answers_while_sixty_followers_are_open(followers, token_client):
    api = token_client(make_user("bystander"))

    def list_runs():
        try:
            return api.get("/api/runs/").status_code
        finally:
            connection.close()

    _, _, answer = _sixty_streams(followers, while_open=list_runs)
    assert answer == 200


def _handles_of_others() -> int:
    """The database handles besides this thread's own (SQLite keeps a closed handle open while another
    connection of the process holds a lock on the file, so this thread's connection goes first)."""
    connection.close()
    return database_handles()


def test_followers_that_went_leave_no_database_handle_behind(followers):
    before = _handles_of_others()
    _sixty_streams(followers, while_open=lambda: None)
    wait_until(lambda: _handles_of_others() <= before, timeout=20, what=f"the handles to fall back to {before}")


def _open_streams(user, count: int, run_id: str) -> list[int]:
    headers = [token_header(user)]

    async def scenario():
        streams = [SseStream(f"/api/runs/{run_id}/events/", headers=headers) for _ in range(count)]
        statuses = [await stream.open() for stream in streams]
        await asyncio.gather(*(stream.close() for stream in streams))
        return statuses

    return like_daphne(scenario)


@pytest.fixture
def greedy(settings):
    """A user allowed one stream at a time, with a queued run "capped" to follow."""
    settings.DEUZ_MAX_STREAMS_PER_USER = 1
    user = make_user("greedy")
    queued_run("capped", user)
    return user


def test_a_user_over_the_stream_cap_gets_a_429(settings, greedy):
    settings.DEUZ_MAX_STREAMS_PER_USER = 2
    assert _open_streams(greedy, 3, "capped") == [200, 200, 429]


def test_the_429_says_why_in_json(greedy):
    headers = [token_header(greedy)]

    async def scenario():
        first, second = (SseStream("/api/runs/capped/events/", headers=headers) for _ in range(2))
        await first.open()
        await second.open()
        body = await second.read_until("}")
        await asyncio.gather(first.close(), second.communicator.wait(timeout=20))
        return body

    assert like_daphne(scenario) == '{"detail": "Too many open streams: at most 1 at a time per user; close one first."}'


def test_a_closed_stream_gives_its_place_back(greedy):
    assert _open_streams(greedy, 1, "capped") == [200]
    assert _open_streams(greedy, 1, "capped") == [200]


def test_the_cap_is_per_user(settings):
    settings.DEUZ_MAX_STREAMS_PER_USER = 1
    first, second = make_user("one"), make_user("two", "support")
    queued_run("capped", first)

    headers = [[token_header(user)] for user in (first, second)]

    async def scenario():
        streams = [SseStream("/api/runs/capped/events/", headers=each) for each in headers]
        statuses = [await stream.open() for stream in streams]
        await asyncio.gather(*(stream.close() for stream in streams))
        return statuses

    assert like_daphne(scenario) == [200, 200]


def test_a_websocket_over_the_stream_cap_is_closed_with_4429(greedy):
    headers = [token_header(greedy)]

    async def scenario():
        stream = SseStream("/api/runs/capped/events/", headers=headers)
        await stream.open()
        try:
            return await ws_frames("/ws/runs/capped/", headers=headers)
        finally:
            await stream.close()

    assert like_daphne(scenario)[1] == 4429


def test_a_follow_dropped_unclosed_gives_its_place_back(greedy):
    # As when a client goes between the view's return and the first byte, and Django never closes the response.
    async def open_drop_open():
        await follow_open(run_id="capped", cursor=None, authenticate=lambda: greedy, kind="sse")
        gc.collect()
        (await follow_open(run_id="capped", cursor=None, authenticate=lambda: greedy, kind="sse")).close()

    async_to_sync(open_drop_open)()  # the second follow_open raises FollowRefused(429) if the first kept its place


# ---------------------------------------------------------------- failures


@pytest.fixture
def doomed(owner):
    """The owner's queued run "doomed", whose reads are about to fail."""
    return queued_run("doomed", owner)


def _failing_reads(monkeypatch, error: Exception) -> None:
    def read_sync(self, *args, **kwargs):
        raise error

    monkeypatch.setattr(DatabaseStreamStateStore, "read_sync", read_sync)
    monkeypatch.setattr(DatabaseStreamStateStore, "read_texts_sync", read_sync)  # the followers' read


def _events(user, run_id: str) -> list[dict]:
    """Every event of one stream, to [DONE] or to the end of the response."""
    headers = [token_header(user)]

    async def scenario():
        stream = SseStream(f"/api/runs/{run_id}/events/", headers=headers)
        await stream.open()
        body = await stream.read_until("[DONE]")
        await stream.communicator.wait(timeout=20)
        return body

    return parse_sse(like_daphne(scenario))


def test_a_data_error_mid_stream_ends_with_a_redacted_error_part_and_done(monkeypatch, settings, owner, doomed):
    _failing_reads(monkeypatch, DataError(f"invalid byte sequence near {settings.SECRET_KEY}"))
    events = _events(owner, "doomed")
    assert [event["data"] for event in events] == [
        {"type": "error", "error": {"name": "DataError", "message": "invalid byte sequence near [redacted]"},
         "retryable": False, "retry_after_ms": None},
        "[DONE]",
    ]


def test_a_lost_database_mid_stream_is_an_error_part_without_done_so_the_client_reconnects(monkeypatch, owner, doomed):
    _failing_reads(monkeypatch, OperationalError("server closed the connection unexpectedly"))
    events = _events(owner, "doomed")
    assert [event["data"]["error"]["name"] for event in events] == ["OperationalError"]


def test_a_websocket_ends_a_data_error_with_a_redacted_error_frame_and_done(monkeypatch, settings, owner, doomed):
    _failing_reads(monkeypatch, DataError(f"bad {settings.DEUZ_APPROVAL_SECRET}"))
    received, code = ws_follow("/ws/runs/doomed/", headers=[token_header(owner)])
    assert received == [{"seq": None, "part": {"type": "error", "error": {"name": "DataError", "message": "bad [redacted]"},
                                               "retryable": False, "retry_after_ms": None}},
                        {"done": True}] and code == 1000


def test_a_websocket_closes_a_lost_database_with_1011_so_the_client_reconnects(monkeypatch, owner, doomed):
    _failing_reads(monkeypatch, OperationalError("connection refused"))
    received, code = ws_follow("/ws/runs/doomed/", headers=[token_header(owner)])
    assert [frame["part"]["error"]["name"] for frame in received] == ["OperationalError"] and code == 1011


def _database_down_at_setup(monkeypatch) -> None:
    def unreachable(run, *, user):
        raise OperationalError("could not connect to server")

    monkeypatch.setattr("runs.wire.followers.run_is_readable_by", unreachable)


def test_a_database_down_when_a_stream_starts_is_a_503_worth_retrying(monkeypatch, client, owner, doomed):
    _database_down_at_setup(monkeypatch)
    client.force_login(owner)
    response = client.get("/api/runs/doomed/events/")
    assert (response.status_code, response.json()) == (503, {"detail": "The database is unavailable; try again shortly."})


def test_a_database_down_when_a_websocket_starts_is_closed_with_4503(monkeypatch, owner, doomed):
    _database_down_at_setup(monkeypatch)
    assert ws_follow("/ws/runs/doomed/", headers=[token_header(owner)]) == ([], 4503)


# ---------------------------------------------------------------- the read threads


def test_the_read_threads_are_bounded():
    reads = FollowerReads(size=3)
    gate = threading.Barrier(3, timeout=10)

    def where() -> int:
        try:
            gate.wait()  # three at once: every thread busy while the others queue
        except threading.BrokenBarrierError:
            pass
        return threading.get_ident()

    async def many():
        return await asyncio.gather(*(reads.run(where) for _ in range(30)))

    assert len(set(async_to_sync(many)())) == 3


def _one_thread_held():
    """FollowerReads(size=1) with its thread held by a read until ``release.set()``: what is asked meanwhile waits."""
    reads = FollowerReads(size=1)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        release.wait(10)

    return reads, reads.submit(hold), held, release


def test_the_same_read_asked_while_it_waits_for_a_thread_runs_once_for_every_caller():
    reads, holding, held, release = _one_thread_held()
    calls: list[str] = []

    def where(run_id: str) -> str:
        calls.append(run_id)
        return f"{run_id} stands"

    async def fifty_followers_ask():
        asked = [asyncio.ensure_future(reads.run_shared(where, "r1")) for _ in range(50)]
        asked.append(asyncio.ensure_future(reads.run_shared(where, "r2")))
        await asyncio.sleep(0)
        held.wait(10)
        release.set()
        return [answer.value for answer in await asyncio.gather(*asked)]

    answers = async_to_sync(fifty_followers_ask)()
    assert answers == ["r1 stands"] * 50 + ["r2 stands"]
    assert sorted(calls) == ["r1", "r2"]


def _first_read_held():
    """FollowerReads(size=2) and a read ``journal(after)`` whose calls are counted (the nth returns n); the first
    call holds its thread (``started`` set) until ``release.set()``."""
    reads = FollowerReads(size=2)
    started, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def journal(after: int) -> int:
        calls.append(after)
        number = len(calls)
        if number == 1:
            started.set()
            release.wait(10)
        return number

    return reads, journal, calls, started, release


def test_a_read_that_has_started_is_not_joined_by_a_later_caller():
    reads, journal, calls, started, release = _first_read_held()

    async def one_during_the_other():
        first = asyncio.ensure_future(reads.run_shared(journal, 4))
        await asyncio.to_thread(started.wait, 10)
        second = asyncio.ensure_future(reads.run_shared(journal, 4))  # may need what was written since
        answer = await second
        release.set()
        return (await first).value, answer.value

    assert async_to_sync(one_during_the_other)() == (1, 2)
    assert calls == [4, 4]


def _counted_reads(size: int = 2):
    """FollowerReads(size=size) and a read ``journal(after)`` whose calls are counted; the nth call returns n."""
    calls: list[int] = []

    def journal(after: int) -> int:
        calls.append(after)
        return len(calls)

    return FollowerReads(size=size), journal, calls


def test_a_running_read_begun_after_the_freshness_asked_for_is_joined():
    reads, journal, calls, started, release = _first_read_held()

    async def one_during_the_other():
        heard = time.monotonic()  # a notification was heard; then the first follower asked
        first = asyncio.ensure_future(reads.run_shared(journal, 4, fresh_after=heard))
        await asyncio.to_thread(started.wait, 10)
        second = asyncio.ensure_future(reads.run_shared(journal, 4, fresh_after=heard))  # woken by the same one
        await asyncio.sleep(0.05)
        release.set()
        return (await first).value, (await second).value

    assert async_to_sync(one_during_the_other)() == (1, 1)
    assert calls == [4]


def test_a_caller_who_joined_a_running_read_cannot_cancel_it_under_the_thread():
    reads, journal, calls, started, release = _first_read_held()
    heard = time.monotonic()
    first = reads.submit(journal, 4, shared=True, fresh_after=heard)
    assert started.wait(10)
    joined = reads.submit(journal, 4, shared=True, fresh_after=heard)
    # Past cancelling, like the futures the read started with: the thread never meets one cancelled between its
    # look and its answer (which raised, killed the thread and left the other sharers waiting).
    assert joined.cancel() is False
    release.set()
    assert (first.result(10).value, joined.result(10).value) == (1, 1)
    assert reads.submit(journal, 5).result(10) == 2  # and the thread serves the next read


def test_a_returned_read_begun_after_the_freshness_asked_for_answers_at_once():
    reads, journal, calls = _counted_reads()

    async def one_after_the_other():
        heard = time.monotonic()
        first = await reads.run_shared(journal, 4, fresh_after=heard)
        second = await reads.run_shared(journal, 4, fresh_after=heard)
        return first, second

    first, second = async_to_sync(one_after_the_other)()
    assert second == first and first.value == 1
    assert calls == [4]


def test_a_read_begun_before_the_freshness_asked_for_is_not_shared():
    reads, journal, calls = _counted_reads()

    async def one_then_a_later_notification():
        first = await reads.run_shared(journal, 4, fresh_after=time.monotonic())
        heard = time.monotonic()  # a notification after the first read began: its answer may be stale
        return first.value, (await reads.run_shared(journal, 4, fresh_after=heard)).value

    assert async_to_sync(one_then_a_later_notification)() == (1, 2)
    assert calls == [4, 4]


def test_a_returned_read_is_not_shared_without_a_freshness():
    reads, journal, calls = _counted_reads()

    async def twice():
        return [(await reads.run_shared(journal, 4)).value for _ in range(2)]

    assert async_to_sync(twice)() == [1, 2]


def test_a_failed_read_is_not_shared_once_over():
    reads = FollowerReads(size=1)
    calls: list[int] = []

    def journal(after: int) -> int:
        calls.append(after)
        if len(calls) == 1:
            raise ConnectionError("the database went away")
        return len(calls)

    async def failed_then_again():
        heard = time.monotonic()
        with pytest.raises(ConnectionError):
            await reads.run_shared(journal, 4, fresh_after=heard)
        return (await reads.run_shared(journal, 4, fresh_after=heard)).value

    assert async_to_sync(failed_then_again)() == 2


def test_a_cancelled_caller_does_not_cancel_the_read_it_shares():
    reads, holding, held, release = _one_thread_held()

    async def one_gives_up():
        leaving = asyncio.ensure_future(reads.run_shared(str, "r1"))
        staying = asyncio.ensure_future(reads.run_shared(str, "r1"))
        await asyncio.sleep(0)
        leaving.cancel()
        held.wait(10)
        release.set()
        return (await staying).value

    assert async_to_sync(one_gives_up)() == "r1"


def test_a_read_thread_closes_its_connection_when_it_runs_out_of_work():
    reads = FollowerReads(size=1)

    def query() -> None:
        Run.objects.exists()

    def is_connected() -> bool:
        return connection.connection is not None

    async def one_then_the_other():
        await reads.run(query)
        return await reads.run(is_connected)

    assert async_to_sync(one_then_the_other)() is False


def test_an_answer_kept_past_its_time_is_not_shared(monkeypatch):
    reads, journal, calls = _counted_reads()
    monkeypatch.setattr(FollowerReads, "KEEP_SECONDS", 0.0)

    async def twice_with_the_same_freshness():
        heard = time.monotonic()
        first = await reads.run_shared(journal, 4, fresh_after=heard)
        await reads.run_shared(journal, 5)  # a new question drops what is past its time
        return first.value, (await reads.run_shared(journal, 4, fresh_after=heard)).value

    assert async_to_sync(twice_with_the_same_freshness)() == (1, 3)
