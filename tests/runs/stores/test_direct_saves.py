"""Checkpoint saves on the event loop's own SQLite connection (runs.stores.direct_sqlite), and journals that stay
gapless when a save rolls back after its hook flushed parts."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from runs.errors import StaleOwnerError
from runs.execution.legs import _Leg
from runs.models import Checkpoint, Run, RunMessage
from runs.services.lifecycle import Claim
from runs.stores import direct_postgres, direct_sqlite
from runs.stores.sessions import DatabaseSessionStore
from runs.stores.streams import DatabaseStreamStateStore
from tests.factories import make_run
from tests.processes import wait_until
from tests.runs.stores.test_db_store import _PartLog
from tests.runs.stores.test_store_contract import checkpoint, history

pytestmark = pytest.mark.django_db(transaction=True)

sqlite_only = pytest.mark.skipif(
    "connection.vendor != 'sqlite'", reason="the loop's own SQLite connection; PostgreSQL's own async connection is tested below"
)


@pytest.fixture
def run_r1():
    return make_run("r1", owner_epoch=3)


@pytest.fixture
def direct_statements():
    """The SQL the direct connections run from now on."""
    seen: list[str] = []

    def trace(raw):
        raw.set_trace_callback(seen.append)

    direct_sqlite.CONNECT_HOOKS.append(trace)
    direct_sqlite.close()
    yield seen
    direct_sqlite.CONNECT_HOOKS.remove(trace)
    direct_sqlite.close()


def leg_store(epoch=3):
    """A leg's fenced session store with its save hook, and the leg (its journal writer reads ``source``)."""
    leg = _Leg(Claim("r1", epoch, 1, "start"), fault=lambda point: None)
    leg.writer.source = _PartLog([])
    return leg, leg.session_store()


async def finish(store):
    """Close the view's own connection and the ORM's thread's (an open one keeps the test database from being
    dropped)."""
    from django.db import connections

    await store.aclose()
    await sync_to_async(connections.close_all)()


def journal_texts():
    page = DatabaseStreamStateStore().read_sync("r1")
    return [(seq, part.get("text")) for seq, part in page.parts if part["type"] == "text-delta"]


@sqlite_only
def test_a_steady_async_save_runs_on_the_event_loops_own_connection(run_r1, direct_statements):
    leg, store = leg_store()

    async def two_saves():
        await store.save(checkpoint(step=0, messages=history(2)))  # the first reads the stored head: the ORM's path
        await store.save(checkpoint(step=1, messages=history(4)))
        await finish(store)

    asyncio.run(two_saves())
    assert any('INSERT INTO "runs_checkpoint"' in statement for statement in direct_statements)
    assert DatabaseSessionStore().load("r1")["messages"] == history(4)


@sqlite_only
def test_with_direct_saves_off_every_save_goes_through_the_orms_thread(run_r1, direct_statements, settings):
    settings.DEUZ_DIRECT_SAVES = False
    leg, store = leg_store()

    async def two_saves():
        await store.save(checkpoint(step=0, messages=history(2)))
        await store.save(checkpoint(step=1, messages=history(4)))
        await finish(store)

    asyncio.run(two_saves())
    assert direct_statements == [] and DatabaseSessionStore().load("r1")["messages"] == history(4)


@sqlite_only
def test_a_direct_save_of_a_stale_owner_is_refused_and_writes_nothing(run_r1, direct_statements):
    leg, store = leg_store()

    async def saves():
        await store.save(checkpoint(step=0, messages=history(2)))
        await sync_to_async(Run.objects.filter(run_id="r1").update)(owner_epoch=4)  # another worker claimed it
        with pytest.raises(StaleOwnerError):
            await store.save(checkpoint(step=1, messages=history(4)))
        await finish(store)

    asyncio.run(saves())
    assert any(statement.startswith("UPDATE") for statement in direct_statements)
    assert (Checkpoint.objects.count(), RunMessage.objects.count()) == (1, 2)


def test_the_journal_parts_of_a_refused_async_save_are_written_by_the_next_one(run_r1):
    leg, store = leg_store()
    parts = leg.writer.source.parts

    async def saves():
        parts.append({"type": "text-delta", "text": "a"})
        await store.save(checkpoint(step=0, messages=history(2)))
        parts.append({"type": "text-delta", "text": "b"})
        await sync_to_async(Run.objects.filter(run_id="r1").update)(owner_epoch=4)
        with pytest.raises(StaleOwnerError):
            await store.save(checkpoint(step=1, messages=history(4)))
        await sync_to_async(Run.objects.filter(run_id="r1").update)(owner_epoch=3)
        parts.append({"type": "text-delta", "text": "c"})
        await store.save(checkpoint(step=1, messages=history(4)))
        await finish(store)

    asyncio.run(saves())
    assert journal_texts() == [(0, "a"), (1, "b"), (2, "c")]


def test_a_save_rolled_back_after_its_hook_flushed_the_journal_leaves_no_gap(run_r1, monkeypatch):
    leg, store = leg_store()
    parts = leg.writer.source.parts
    parts.append({"type": "text-delta", "text": "a"})
    store.save(checkpoint(step=0, messages=history(2)))

    def approvals_fail(saved):
        raise RuntimeError("recording the approval requests failed")

    monkeypatch.setattr("runs.execution.legs.approval_checkpoint_saved", approvals_fail)
    parts.append({"type": "text-delta", "text": "b"})
    with pytest.raises(RuntimeError):
        # a suspension's save: the journal flush ran, then recording its requests failed and the save rolled back
        store.save(checkpoint(step=1, messages=history(4), status="suspended"))
    monkeypatch.undo()
    parts.append({"type": "text-delta", "text": "c"})
    store.save(checkpoint(step=2, messages=history(6)))
    assert journal_texts() == [(0, "a"), (1, "b"), (2, "c")]


@sqlite_only
def test_a_fenced_views_async_load_reads_on_the_event_loops_own_connection(run_r1, direct_statements):
    DatabaseSessionStore().save(checkpoint(step=1, messages=history(4)))
    leg, store = leg_store()

    async def load():
        loaded = await store.aload("r1")
        await finish(store)
        return loaded

    loaded = asyncio.run(load())
    assert loaded["messages"] == history(4) and loaded["step_index"] == 1
    assert any(statement.startswith('SELECT') and '"runs_checkpoint"' in statement for statement in direct_statements)


@sqlite_only
def test_a_fenced_views_load_of_a_run_without_checkpoints_learns_its_key_through_the_orm(run_r1, direct_statements):
    # The loop's thread may not use the ORM, and a first save needs the run's key: the load goes to the ORM's
    # thread for it, and the first save after it is direct.
    leg, store = leg_store()

    async def load_then_save():
        assert await store.aload("r1") is None
        await store.save(checkpoint(step=0, messages=history(2)))
        await finish(store)

    asyncio.run(load_then_save())
    assert any('INSERT INTO "runs_checkpoint"' in statement for statement in direct_statements)
    assert DatabaseSessionStore().load("r1")["messages"] == history(2)


@sqlite_only
def test_the_loops_own_sqlite_connection_closes_when_its_loop_ends(run_r1):
    from django.db import connections

    from tests.runs.wire.test_follow_resources import database_handles

    connection.close()
    direct_sqlite.close()
    before = database_handles()
    leg, store = leg_store()

    async def save_twice():
        await store.save(checkpoint(step=0, messages=history(2)))
        await store.save(checkpoint(step=1, messages=history(4)))  # direct: the loop's thread opens its connection
        await sync_to_async(connections.close_all)()  # the ORM's thread's, which the first save opened
        return database_handles()

    during = asyncio.run(save_twice())
    assert during > before and database_handles() == before


@sqlite_only
def test_a_busy_database_hands_the_save_to_the_orms_path(run_r1, direct_statements):
    import sqlite3
    import threading

    leg, store = leg_store()
    locked, release = threading.Event(), threading.Event()

    def another_writer():  # holds SQLite's write lock far longer than a direct save waits for it
        raw = sqlite3.connect(connection.settings_dict["NAME"], uri=True, isolation_level=None)
        raw.execute("BEGIN IMMEDIATE")
        locked.set()
        release.wait(5)
        raw.execute("COMMIT")
        raw.close()

    async def saves():
        await store.save(checkpoint(step=0, messages=history(2)))
        holder = threading.Thread(target=another_writer)
        holder.start()
        locked.wait(5)
        asyncio.get_running_loop().call_later(0.3, release.set)
        await store.save(checkpoint(step=1, messages=history(4)))  # waits for the lock on a thread, not the loop
        holder.join()
        await finish(store)

    asyncio.run(saves())
    assert DatabaseSessionStore().load("r1")["messages"] == history(4)
    assert not any('INSERT INTO "runs_checkpoint"' in statement for statement in direct_statements)


@sqlite_only
def test_the_journal_writers_tick_appends_on_the_event_loops_own_connection(run_r1, direct_statements):
    from runs.wire.writer import JournalWriter

    writer = JournalWriter(run_id="r1", epoch=3)
    writer.source = _PartLog([{"type": "text-delta", "text": "a"}])
    writer.flush_sync()  # the first append learns the run's key and next seq through the ORM
    writer.source.parts.append({"type": "text-delta", "text": "b"})
    asyncio.run(writer.tick())
    assert any('INSERT INTO runs_journalentry' in statement for statement in direct_statements)
    assert journal_texts() == [(0, "a"), (1, "b")]


@sqlite_only
def test_a_stale_journal_writers_tick_is_refused_on_the_direct_path(run_r1, direct_statements):
    from runs.wire.writer import JournalWriter

    writer = JournalWriter(run_id="r1", epoch=3)
    writer.source = _PartLog([{"type": "text-delta", "text": "a"}])
    writer.flush_sync()
    Run.objects.filter(run_id="r1").update(owner_epoch=4)
    writer.source.parts.append({"type": "text-delta", "text": "late"})
    with pytest.raises(StaleOwnerError):
        asyncio.run(writer.tick())
    assert journal_texts() == [(0, "a")]


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="the folded statement is PostgreSQL's")
def test_a_steady_postgresql_save_writes_its_journal_parts_in_its_one_statement(run_r1):
    from django.test.utils import CaptureQueriesContext

    leg, store = leg_store()
    parts = leg.writer.source.parts
    parts.append({"type": "text-delta", "text": "a"})
    store.save(checkpoint(step=0, messages=history(2)))
    parts.extend([{"type": "text-delta", "text": "b"}, {"type": "text-delta", "text": "c"}])
    with CaptureQueriesContext(connection) as queries:
        store.save(checkpoint(step=1, messages=history(4)))
    assert [query["sql"][:6] for query in queries.captured_queries] == ["WITH f"]
    assert journal_texts() == [(0, "a"), (1, "b"), (2, "c")]


postgresql_only = pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="a view's own async connection is PostgreSQL's"
)


def _direct_connections() -> int:
    """The loops' own connections to this database (the ORM's come and go with its pool)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND application_name = %s", [direct_postgres.APPLICATION_NAME])
        return cursor.fetchone()[0]


@postgresql_only
@pytest.mark.parametrize("legs", [1, 8])
def test_the_legs_of_one_event_loop_share_a_few_connections_closed_with_the_loop(run_r1, settings, legs):
    from django.db import connections

    settings.DEUZ_DIRECT_CONNECTIONS = 3
    names = [f"r{n}" for n in range(1, legs + 1)]
    for name in names[1:]:
        make_run(name, owner_epoch=3)
    views = [_Leg(Claim(name, 3, 1, "start"), fault=lambda point: None).session_store() for name in names]
    seen = {}

    async def steady(view, name):
        for step in range(1, 6):
            await view.save(checkpoint(name, step=step, messages=history(2 * step + 2)))

    async def legs_():
        for view, name in zip(views, names):  # the first save reads the head on the ORM's thread
            await view.save(checkpoint(name, step=0, messages=history(2)))
        await asyncio.gather(*(steady(view, name) for view, name in zip(views, names)))  # then all at once
        seen["open"] = await sync_to_async(_direct_connections)()
        await sync_to_async(connections.close_all)()  # the ORM's thread's; the loop's own close with the loop

    asyncio.run(legs_())
    assert [DatabaseSessionStore().load(name)["messages"] for name in names] == [history(12)] * legs
    assert seen["open"] == (1 if legs == 1 else 3)  # one for a lone leg; never more than the limit
    assert wait_until(lambda: _direct_connections() == 0, timeout=5)  # the server sees the close a moment later


@postgresql_only
def test_a_stale_owners_async_postgresql_save_is_refused_and_writes_nothing(run_r1):
    leg, store = leg_store()

    async def saves():
        await store.save(checkpoint(step=0, messages=history(2)))
        await sync_to_async(Run.objects.filter(run_id="r1").update)(owner_epoch=4)
        try:
            with pytest.raises(StaleOwnerError):
                await store.save(checkpoint(step=1, messages=history(4)))
        finally:
            await finish(store)

    asyncio.run(saves())
    assert (Checkpoint.objects.count(), RunMessage.objects.count()) == (1, 2)


@postgresql_only
def test_an_async_postgresql_save_never_waits_on_a_thread_that_waits_on_its_journal_writer(run_r1):
    import threading

    from django.db import connections, transaction

    leg, store = leg_store()
    row_locked, save_started = threading.Event(), threading.Event()
    took_writer = {}

    def a_threads_save():  # what an ORM save does: the run's row locked first, then the journal writer
        try:
            with transaction.atomic():
                Run.objects.select_for_update().filter(run_id="r1").first()
                row_locked.set()
                save_started.wait(5)
                took_writer["ok"] = leg.writer._lock.acquire(timeout=5)
                if took_writer["ok"]:
                    leg.writer._lock.release()
        finally:
            connections.close_all()

    async def saves():
        await store.save(checkpoint(step=0, messages=history(2)))
        thread = threading.Thread(target=a_threads_save)
        thread.start()
        await asyncio.to_thread(row_locked.wait, 5)
        saving = asyncio.ensure_future(store.save(checkpoint(step=1, messages=history(4))))
        await asyncio.sleep(0.05)  # the save holds the writer and waits for the row
        save_started.set()
        await saving
        await asyncio.to_thread(thread.join)
        await finish(store)

    asyncio.run(saves())
    assert took_writer == {"ok": True}
    assert DatabaseSessionStore().load("r1")["messages"] == history(4)


def _loops_prepared_statements() -> int:
    async def count() -> int:
        shared = direct_postgres._loop_connection()
        connection_ = await shared.take()  # the one the saves ran on: they ran one after the other
        try:
            cursor = await connection_.execute("SELECT count(*) FROM pg_prepared_statements")
            return (await cursor.fetchone())[0]
        finally:
            await shared.give_back(connection_)

    return count


@postgresql_only
@pytest.mark.parametrize(("through_a_pooler", "prepared"), [(False, True), (True, False)])
def test_the_loops_own_connection_prepares_its_statements_unless_a_transaction_pooler_is_in_the_way(
    run_r1, through_a_pooler, prepared
):
    from django.db import connections

    connections["default"].settings_dict["DISABLE_SERVER_SIDE_CURSORS"] = through_a_pooler
    leg, store = leg_store()
    seen = {}

    async def saves():
        for step in range(8):  # the same statement each time (two new messages): prepared after five
            await store.save(checkpoint(step=step, messages=history(2 * step + 2)))
        seen["prepared"] = await _loops_prepared_statements()()
        await finish(store)

    try:
        asyncio.run(saves())
    finally:
        connections["default"].settings_dict["DISABLE_SERVER_SIDE_CURSORS"] = False
    assert (seen["prepared"] > 0) is prepared


@postgresql_only
def test_the_first_save_of_a_new_run_after_its_empty_load_goes_direct(run_r1):
    leg, store = leg_store()
    through_the_orm = []
    orm_save = store._save_async

    async def counted(checkpoint):
        through_the_orm.append(checkpoint["step_index"])
        return await orm_save(checkpoint)

    store._save_async = counted

    async def first_leg():
        assert await store.aload("r1") is None  # what a leg checks first: nothing stored yet
        await store.save(checkpoint(step=0, messages=history(2)))
        await store.save(checkpoint(step=1, messages=history(4)))
        await finish(store)

    asyncio.run(first_leg())
    assert through_the_orm == []
    assert DatabaseSessionStore().load("r1")["messages"] == history(4)
