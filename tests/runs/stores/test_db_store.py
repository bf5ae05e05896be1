"""What only the database store does: fencing, writing only what changed, encryption at rest."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.db import connection

from runs.errors import SealedDataError, StaleOwnerError
from runs.runtime.exceptions import CheckpointCorruptError
from runs.models import Checkpoint, Run, RunMessage
from runs.services.lifecycle import run_checkpoint_mirror
from runs.stores.sessions import DatabaseSessionStore, _engine_store
from runs.stores.sessions_postgres import PostgresSessionStore
from runs.stores.sessions_sqlite import SQLiteSessionStore
from tests.factories import make_run
from tests.runs.stores.test_store_contract import checkpoint, history

pytestmark = pytest.mark.django_db


@pytest.fixture
def owned_run():
    return make_run("r1", owner_epoch=3)


def test_the_store_and_its_fenced_views_are_the_engines_own_kind():
    engine = {"sqlite": SQLiteSessionStore, "postgresql": PostgresSessionStore}[connection.vendor]
    store = DatabaseSessionStore()
    assert (type(store), type(store.fenced("r1", 3)), type(store.fenced("r1", 3).fenced("r1", 4))) == (engine,) * 3
    assert isinstance(store, DatabaseSessionStore)


def test_an_engine_with_no_fast_path_gets_the_portable_store():
    assert _engine_store("mysql") is DatabaseSessionStore


def test_the_current_owner_may_write(owned_run):
    DatabaseSessionStore().fenced("r1", 3).save(checkpoint())
    assert Checkpoint.objects.filter(run=owned_run, owner_epoch=3).count() == 1


def test_a_stale_owner_is_rejected_and_writes_nothing(owned_run):
    with pytest.raises(StaleOwnerError):
        DatabaseSessionStore().fenced("r1", 2).save(checkpoint(messages=history(3)))
    assert (Checkpoint.objects.count(), RunMessage.objects.count()) == (0, 0)


def test_a_stale_owner_cannot_write_a_sub_agent_checkpoint_either(owned_run):
    with pytest.raises(StaleOwnerError):
        DatabaseSessionStore().fenced("r1", 2).save(checkpoint("r1::coder#t1"))


def test_a_fenced_store_refuses_another_runs_checkpoint(owned_run):
    make_run("other", owner_epoch=3)
    with pytest.raises(ValueError):
        DatabaseSessionStore().fenced("r1", 3).save(checkpoint("other"))


def test_the_legs_mirror_hook_moves_the_runs_counters_on_a_root_save(owned_run):
    DatabaseSessionStore().fenced("r1", 3, on_save=run_checkpoint_mirror).save(checkpoint(step=4))
    owned_run.refresh_from_db()
    assert (owned_run.step_index, owned_run.usage) == (4, {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3})


def test_the_store_alone_stores_checkpoints_and_leaves_the_run_as_it_was(owned_run):
    DatabaseSessionStore().fenced("r1", 3).save(checkpoint(step=4))
    owned_run.refresh_from_db()
    assert owned_run.step_index == -1


def test_each_save_writes_only_the_new_messages(owned_run):
    store = DatabaseSessionStore().fenced("r1", 3)
    for step in range(10):
        store.save(checkpoint(step=step, messages=history(2 * step + 2)))
    assert RunMessage.objects.filter(run=owned_run).count() == 20


def test_every_snapshot_is_kept_and_loads_its_own_history(owned_run):
    store = DatabaseSessionStore()
    store.save(checkpoint(step=0, messages=history(2)))
    store.save(checkpoint(step=1, messages=history(4)))
    first = Checkpoint.objects.filter(run=owned_run).order_by("id").first()
    assert store.checkpoint_from_row(first)["messages"] == history(2)


def test_sealed_messages_do_not_hold_the_plaintext(settings, owned_run):
    settings.DEUZ_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    DatabaseSessionStore().save(checkpoint(messages=[{"role": "user", "content": "salary of Ada is 9000"}]))
    assert b"salary" not in bytes(RunMessage.objects.get().data)


def test_sealed_checkpoints_load_back(settings, owned_run):
    settings.DEUZ_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    store = DatabaseSessionStore()
    store.save(checkpoint(messages=history(3), pending_approvals=[{"approval_id": "a"}]))
    assert store.load("r1")["messages"] == history(3)


def test_checkpoints_stay_readable_after_a_key_rotation(settings, owned_run):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.DEUZ_ENCRYPTION_KEYS = [old]
    store = DatabaseSessionStore()
    store.save(checkpoint(step=0, messages=history(2)))
    settings.DEUZ_ENCRYPTION_KEYS = [new, old]
    store.save(checkpoint(step=1, messages=history(4)))
    assert store.load("r1")["messages"] == history(4)


def test_after_rotation_new_data_is_sealed_with_the_first_key(settings, owned_run):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.DEUZ_ENCRYPTION_KEYS = [new, old]
    DatabaseSessionStore().save(checkpoint(messages=history(1)))
    settings.DEUZ_ENCRYPTION_KEYS = [new]
    assert DatabaseSessionStore().load("r1")["messages"] == history(1)


def test_sealed_data_without_keys_is_a_clear_error_not_an_empty_history(settings, owned_run):
    settings.DEUZ_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    DatabaseSessionStore().save(checkpoint(messages=history(2)))
    settings.DEUZ_ENCRYPTION_KEYS = []
    with pytest.raises(SealedDataError, match="DEUZ_ENCRYPTION_KEYS is not set"):
        DatabaseSessionStore().load("r1")


def test_sealed_data_under_an_unknown_key_is_a_clear_error(settings, owned_run):
    settings.DEUZ_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    DatabaseSessionStore().save(checkpoint(messages=history(2)))
    settings.DEUZ_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(SealedDataError, match="cannot be decrypted"):
        DatabaseSessionStore().load("r1")


# A fenced view keeps the head it committed (the lean write path). The cache is filled on commit, so these tests
# commit for real (transaction=True); under a test's outer transaction the view reads the head back instead.


@pytest.fixture
def committed_run(transactional_db):
    return make_run("r1", owner_epoch=3)


def test_a_steady_save_reads_nothing_back(committed_run):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    store = DatabaseSessionStore().fenced("r1", 3)
    messages = history(2)
    store.save(checkpoint(step=0, messages=messages))
    with CaptureQueriesContext(connection) as queries:
        store.save(checkpoint(step=1, messages=[*messages, {"role": "assistant", "content": "next"}]))
    assert [query["sql"] for query in queries if query["sql"].lstrip().upper().startswith("SELECT")] == []


def test_a_stale_owner_is_refused_after_the_cached_head_too(committed_run):
    store = DatabaseSessionStore().fenced("r1", 3)
    messages = history(2)
    store.save(checkpoint(step=0, messages=messages))
    Run.objects.filter(pk=committed_run.pk).update(owner_epoch=4)  # another worker claimed the run
    with pytest.raises(StaleOwnerError):
        store.save(checkpoint(step=1, messages=[*messages, {"role": "assistant", "content": "late"}]))
    assert (Checkpoint.objects.count(), RunMessage.objects.count()) == (1, 2)


def test_a_failed_save_between_saves_loses_no_message(committed_run):
    failing = {"on": False}

    def hook(saved):
        if failing["on"]:
            raise RuntimeError("the hook failed")

    store = DatabaseSessionStore().fenced("r1", 3, on_save=hook)
    store.save(checkpoint(step=0, messages=history(2)))
    failing["on"] = True
    with pytest.raises(RuntimeError):
        store.save(checkpoint(step=1, messages=history(4)))
    failing["on"] = False
    store.save(checkpoint(step=2, messages=history(6)))
    assert DatabaseSessionStore().load("r1")["messages"] == history(6)


def test_a_view_that_loaded_writes_only_the_new_messages(committed_run):
    DatabaseSessionStore().fenced("r1", 3).save(checkpoint(step=0, messages=history(4)))
    resumed = DatabaseSessionStore().fenced("r1", 3)
    loaded = resumed.load("r1")["messages"]
    resumed.save(checkpoint(step=1, messages=[*loaded, {"role": "assistant", "content": "more"}]))
    assert RunMessage.objects.count() == 5 and DatabaseSessionStore().load("r1")["messages"][-1]["content"] == "more"


def test_a_view_after_another_views_save_links_to_the_stored_head(committed_run):
    first, second = DatabaseSessionStore().fenced("r1", 3), DatabaseSessionStore().fenced("r1", 3)
    first.save(checkpoint(step=0, messages=history(2)))
    second.save(checkpoint(step=1, messages=history(4)))
    assert RunMessage.objects.count() == 4 and DatabaseSessionStore().load("r1")["messages"] == history(4)


def test_the_fence_can_carry_the_runs_mirror(owned_run):
    from runs.services.lifecycle import run_checkpoint_mirror_changes

    DatabaseSessionStore().fenced("r1", 3, run_changes=run_checkpoint_mirror_changes).save(checkpoint(step=4))
    owned_run.refresh_from_db()
    assert (owned_run.step_index, owned_run.usage) == (4, {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3})


def test_a_sub_agents_save_leaves_the_runs_mirror_alone(owned_run):
    from runs.services.lifecycle import run_checkpoint_mirror_changes

    DatabaseSessionStore().fenced("r1", 3, run_changes=run_checkpoint_mirror_changes).save(checkpoint("r1::coder#t1", step=4))
    owned_run.refresh_from_db()
    assert owned_run.step_index == -1


def test_a_stale_journal_inside_a_save_hook_is_still_refused(owned_run):
    from runs.stores.streams import DatabaseStreamStateStore

    def hook(saved):  # the save's fence (epoch 3) is held; a journal view of epoch 2 is not covered by it
        DatabaseStreamStateStore().fenced("r1", 2).append("r1", [{"type": "text-delta", "text": "x"}], first_seq=0)

    with pytest.raises(StaleOwnerError):
        DatabaseSessionStore().fenced("r1", 3, on_save=hook).save(checkpoint())
    assert Checkpoint.objects.count() == 0


def test_a_journal_append_in_the_save_hook_commits_with_the_save(owned_run):
    from runs.models import JournalEntry
    from runs.stores.streams import DatabaseStreamStateStore

    def hook(saved):
        DatabaseStreamStateStore().fenced("r1", 3).append("r1", [{"type": "text-delta", "text": "x"}], first_seq=0)
        raise RuntimeError("the rest of the hook failed")

    with pytest.raises(RuntimeError):
        DatabaseSessionStore().fenced("r1", 3, on_save=hook).save(checkpoint())
    assert (Checkpoint.objects.count(), JournalEntry.objects.count()) == (0, 0)


def test_sealed_messages_of_a_fenced_view_do_not_hold_the_plaintext(settings, owned_run):
    settings.DEUZ_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    store = DatabaseSessionStore().fenced("r1", 3)
    store.save(checkpoint(messages=[{"role": "user", "content": "salary of Ada is 9000"}]))
    assert b"salary" not in bytes(RunMessage.objects.get().data) and store.load("r1")["messages"][0]["content"].startswith("salary")


def test_bytes_and_marker_like_dicts_round_trip_through_a_chain(owned_run):
    messages = [
        {"role": "user", "content": "plain"},
        {"role": "tool", "content": [{"output": b"\x00raw", "meta": {"$bytes": "not bytes"}, "price": "$12"}]},
    ]
    DatabaseSessionStore().fenced("r1", 3).save(checkpoint(messages=messages))
    assert DatabaseSessionStore().load("r1")["messages"] == messages


class _PartLog:
    """A leg's part log as the journal writer reads it (what a StreamChatResult offers)."""

    def __init__(self, parts):
        self.parts = list(parts)

    def parts_from(self, index):
        return self.parts[index:]

    def parts_count(self):
        return len(self.parts)


@pytest.mark.django_db(transaction=True)
def test_the_flusher_skips_its_tick_right_after_a_checkpoints_flush_and_writes_on_the_next():
    from asgiref.sync import async_to_sync

    from runs.wire.writer import JournalWriter

    make_run("r1", owner_epoch=3)
    writer = JournalWriter(run_id="r1", epoch=3)
    writer.source = _PartLog([{"type": "text-delta", "text": "a"}, {"type": "text-delta", "text": "b"}])
    writer.flush_all_sync()  # what a checkpoint's save hook does
    writer.source.parts.append({"type": "text-delta", "text": "c"})
    async_to_sync(writer.tick)()
    skipped = writer.last_seq
    async_to_sync(writer.tick)()
    assert (skipped, writer.last_seq) == (1, 2)


def test_a_fenced_view_answers_the_checkpoint_it_loaded_again_without_a_query(committed_run):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    DatabaseSessionStore().fenced("r1", 3).save(checkpoint(step=0, messages=history(4)))
    resumed = DatabaseSessionStore().fenced("r1", 3)
    first = resumed.load("r1")  # a leg checks the checkpoint, then the runtime loads it to resume
    with CaptureQueriesContext(connection) as queries:
        again = resumed.load("r1")
    assert (again, len(queries)) == (first, 0)


def test_a_fenced_view_that_found_nothing_answers_again_without_a_query(committed_run):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    view = DatabaseSessionStore().fenced("r1", 3)
    assert view.load_sync("r1") is None  # a first leg: the leg checks, then the runtime loads to resume
    with CaptureQueriesContext(connection) as queries:
        assert view.load_sync("r1") is None
        assert view.load("r1") is None
    assert len(queries) == 0


def test_a_fenced_view_that_found_nothing_loads_what_it_saved_since(committed_run):
    view = DatabaseSessionStore().fenced("r1", 3)
    view.load_sync("r1")
    view.save(checkpoint(step=0, messages=history(2)))
    assert view.load_sync("r1")["messages"] == history(2)


def test_after_its_own_save_a_fenced_view_loads_what_it_saved(committed_run):
    view = DatabaseSessionStore().fenced("r1", 3)
    view.save(checkpoint(step=0, messages=history(2)))
    view.load("r1")
    view.save(checkpoint(step=1, messages=history(4)))
    assert view.load("r1")["messages"] == history(4)


def test_deleting_a_run_deletes_its_whole_history_and_no_other(owned_run):
    # A history's inner links (a message's parent, a checkpoint's head) carry no constraint: the run's own do.
    other = make_run("r2", owner_epoch=1)
    for run_id, epoch in (("r1", 3), ("r2", 1)):
        store = DatabaseSessionStore().fenced(run_id, epoch)
        for step in range(3):
            store.save(checkpoint(step=step, messages=history(2 * step + 2), run_id=run_id))
    owned_run.delete()
    assert (Checkpoint.objects.count(), RunMessage.objects.count()) == (3, 6)
    assert DatabaseSessionStore().load("r2")["messages"] == history(6)
    assert not Checkpoint.objects.exclude(run=other).exists()


def test_a_history_table_keeps_one_index_besides_its_key():
    # Every index is one more page each save writes, and fsyncs on SQLite with synchronous FULL (issue 8).
    with connection.cursor() as cursor:
        for model in (RunMessage, Checkpoint):
            constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
            indexes = sorted(name for name, about in constraints.items() if about["index"] and not about["primary_key"])
            assert len(indexes) == 1, (model.__name__, indexes)
            assert constraints[indexes[0]]["columns"][:2] == ["run_id", "session_key"]


def test_a_history_with_a_missing_message_is_a_clear_error_not_a_short_history(owned_run):
    DatabaseSessionStore().fenced("r1", 3).save(checkpoint(messages=history(4)))
    RunMessage.objects.filter(position=1).delete()  # nothing in Deuz does this: the links have no constraint
    with pytest.raises(CheckpointCorruptError, match="is broken"):
        DatabaseSessionStore().load("r1")


@pytest.mark.skipif("connection.vendor != 'sqlite'", reason="SQLite's query plans; PostgreSQL plans by statistics")
def test_a_load_reads_through_the_history_indexes(owned_run):
    from django.test.utils import CaptureQueriesContext

    store = DatabaseSessionStore().fenced("r1", 3)
    store.save(checkpoint(step=0, messages=history(4)))
    store.save(checkpoint("r1::coder#t1", messages=history(3), agent_path=["coder"]))
    with CaptureQueriesContext(connection) as captured:
        DatabaseSessionStore().load("r1::coder#t1")
        DatabaseSessionStore().fenced("r1", 3).save(checkpoint(step=1, messages=history(6)))  # reads the head
    plans = []
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            if query["sql"].lstrip().upper().startswith("SELECT"):
                cursor.execute(f"EXPLAIN QUERY PLAN {query['sql']}")
                plans.append(" ".join(row[-1] for row in cursor.fetchall()))
    history_plans = [plan for plan in plans if "runs_runmessage" in plan or "runs_checkpoint" in plan]
    assert len(history_plans) >= 3, plans
    assert not [plan for plan in history_plans if "SCAN runs_" in plan], history_plans
