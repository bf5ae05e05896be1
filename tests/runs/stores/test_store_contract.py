"""One contract for every store back end, over the whole surface the worker uses: the in-memory reference
stores and the database stores (SQLite by default, PostgreSQL when DATABASE_URL is set), for both aliases
(``sessions``: checkpoints; ``streams``: journals), fencing and save hooks included."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync

from django.db.models import F

from runs.models import Run
from runs.runtime.durable import InMemorySessionStore, InMemoryStreamStateStore, OwnershipLostError
from runs.runtime.stores import OwnedSessionStore, SavedCheckpoint
from runs.runtime.wire import OwnedStreamStateStore
from runs.stores.sessions import DatabaseSessionStore
from runs.stores.streams import DatabaseStreamStateStore
from tests.factories import make_run

pytestmark = pytest.mark.django_db  # the database store needs it; the memory store ignores it

USAGE = {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}


def checkpoint(run_id="r1", step=0, messages=None, status="running", **extra):
    return {
        "version": 1, "run_id": run_id, "step_id": f"{run_id}#{step}", "step_index": step, "status": status,
        "messages": messages if messages is not None else [{"role": "user", "content": "hi"}],
        "usage": dict(USAGE), "created_at": 1000 + step, **extra,
    }


def history(n):
    """n messages of a tool loop, built the way the runtime builds them (each step a new list)."""
    messages = [{"role": "user", "content": "go"}]
    for i in range(1, n):
        role = "assistant" if i % 2 else "tool"
        messages = [*messages, {"role": role, "content": [{"type": "text", "text": f"message {i}"}]}]
    return messages


@pytest.fixture(params=["memory", "database"])
def store(request):
    if request.param == "memory":
        return InMemorySessionStore()
    return DatabaseSessionStore()


@pytest.fixture(params=["memory", "database"])
def journal(request):
    if request.param == "memory":
        return InMemoryStreamStateStore()
    return DatabaseStreamStateStore()


def take_over(store, run_id: str) -> int:
    """What a claim does: the run's owner epoch goes up by one; returns the new epoch."""
    if isinstance(store, (InMemorySessionStore, InMemoryStreamStateStore)):
        return store.claim(run_id)
    runs = Run.objects.filter(run_id=run_id)
    if not runs.exists():
        make_run(run_id, agent="test")
    runs.update(owner_epoch=F("owner_epoch") + 1)
    return runs.get().owner_epoch


def test_an_unknown_run_loads_as_none(store):
    assert store.load("nobody") is None


def test_a_saved_checkpoint_loads_back_equal(store):
    saved = checkpoint(messages=[{"role": "user", "content": [
        {"type": "text", "text": "look"}, {"type": "image", "data": b"\x00\x89PNG\xff", "media_type": "image/png"}]}],
        pending_approvals=[{"approval_id": "a1", "tool_call_id": "c1", "tool_name": "pay", "input": {"$bytes": "x"},
                            "token": "v1.x.y"}])
    store.save(saved)
    assert store.load("r1") == saved


def test_the_latest_save_wins(store):
    store.save(checkpoint(step=0, messages=history(2)))
    store.save(checkpoint(step=1, messages=history(4)))
    loaded = store.load("r1")
    assert (loaded["step_index"], loaded["messages"]) == (1, history(4))


def test_runs_are_independent(store):
    store.save(checkpoint("a", messages=history(2)))
    store.save(checkpoint("b", messages=history(3)))
    assert (len(store.load("a")["messages"]), len(store.load("b")["messages"])) == (2, 3)


def test_a_long_history_loads_in_order(store):
    for step in range(30):
        store.save(checkpoint(step=step, messages=history(2 * step + 2)))
    assert store.load("r1")["messages"] == history(60)


def test_a_rewritten_history_loads_as_written(store):
    store.save(checkpoint(step=0, messages=history(5)))
    rewritten = [*history(3), {"role": "assistant", "content": "a different ending"}]
    store.save(checkpoint(step=1, messages=rewritten))
    assert store.load("r1")["messages"] == rewritten


def test_a_shorter_history_loads_as_written(store):
    store.save(checkpoint(step=0, messages=history(6)))
    store.save(checkpoint(step=1, messages=history(2)))
    assert store.load("r1")["messages"] == history(2)


def test_sub_agent_keys_are_runs_of_their_own(store):
    store.save(checkpoint("root", messages=history(2)))
    store.save(checkpoint("root::coder#t1", messages=history(3), agent_path=["coder"], status="suspended"))
    child = store.load("root::coder#t1")
    assert (len(store.load("root")["messages"]), child["agent_path"], child["status"]) == (2, ["coder"], "suspended")


def test_list_names_every_stored_run(store):
    store.save(checkpoint("a"))
    store.save(checkpoint("b"))
    assert sorted(store.list()) == ["a", "b"]


def test_delete_removes_a_run(store):
    store.save(checkpoint("a"))
    store.delete("a")
    assert store.load("a") is None


def test_deleting_a_sub_agents_key_leaves_its_parent(store):
    store.save(checkpoint("root", messages=history(2)))
    store.save(checkpoint("root::coder#t1", messages=history(3), agent_path=["coder"]))
    store.delete("root::coder#t1")
    assert (store.load("root::coder#t1"), store.load("root")["messages"]) == (None, history(2))


def test_async_callers_get_awaitables(store):
    async def roundtrip():
        result = store.save(checkpoint("async-run", messages=history(3)))
        if asyncio.iscoroutine(result) or hasattr(result, "__await__"):
            await result
        loaded = store.load("async-run")
        return await loaded if hasattr(loaded, "__await__") else loaded

    assert async_to_sync(roundtrip)()["messages"] == history(3)


# ----------------------------------------------------------------- the owned surface


def test_the_back_end_implements_the_whole_protocol(store, journal):
    assert isinstance(store, OwnedSessionStore) and isinstance(journal, OwnedStreamStateStore)


def test_the_current_owner_saves_through_a_fenced_view(store):
    epoch = take_over(store, "r1")
    store.fenced("r1", epoch).save(checkpoint(step=2))
    assert store.load("r1")["step_index"] == 2


def test_a_stale_owner_is_refused_and_stores_nothing(store):
    stale = take_over(store, "r1")
    take_over(store, "r1")
    with pytest.raises(OwnershipLostError):
        store.fenced("r1", stale).save(checkpoint(messages=history(3)))
    assert store.load("r1") is None


def test_a_stale_owner_cannot_save_a_sub_agent_checkpoint_either(store):
    stale = take_over(store, "r1")
    take_over(store, "r1")
    with pytest.raises(OwnershipLostError):
        store.fenced("r1", stale).save(checkpoint("r1::coder#t1"))
    assert store.load("r1::coder#t1") is None


def test_a_fenced_view_refuses_another_runs_checkpoint(store):
    take_over(store, "other")
    with pytest.raises(ValueError):
        store.fenced("r1", take_over(store, "r1")).save(checkpoint("other"))


def test_the_save_hook_hears_each_save_with_the_previous_status(store):
    heard: list[SavedCheckpoint] = []
    view = store.fenced("r1", take_over(store, "r1"), on_save=heard.append)
    view.save(checkpoint(step=0, status="suspended"))
    view.save(checkpoint(step=1))
    assert [(saved.checkpoint["step_index"], saved.previous_status) for saved in heard] == [(0, None), (1, "suspended")]


def test_a_raising_save_hook_undoes_the_save(store):
    def refuse(saved):
        raise RuntimeError("bookkeeping failed")

    view = store.fenced("r1", take_over(store, "r1"), on_save=refuse)
    with pytest.raises(RuntimeError):
        view.save(checkpoint(step=0))
    assert store.load("r1") is None


def test_aload_loads_what_was_saved(store):
    store.save(checkpoint(messages=history(3)))
    assert async_to_sync(store.aload)("r1")["messages"] == history(3)


def test_checkpoint_list_holds_every_save_oldest_first(store):
    take_over(store, "r1")
    for step in range(3):
        store.save(checkpoint(step=step, messages=history(step + 1)))
    assert [cp["step_index"] for cp in store.checkpoint_list("r1")] == [0, 1, 2]


def test_checkpoint_list_adds_sub_agents_only_when_asked(store):
    take_over(store, "r1")
    store.save(checkpoint("r1", step=0))
    store.save(checkpoint("r1::coder#t1", step=0, agent_path=["coder"]))
    store.save(checkpoint("r1", step=1))
    keys = [cp["run_id"] for cp in store.checkpoint_list("r1", include_sub_agents=True)]
    assert (keys, len(store.checkpoint_list("r1"))) == (["r1", "r1::coder#t1", "r1"], 2)


# ------------------------------------------------------------------------ journals


def test_journal_seqs_are_gapless_from_zero(journal):
    epoch = take_over(journal, "r1")
    view = journal.fenced("r1", epoch)
    view.append("r1", [{"type": "start"}, {"type": "text-delta", "text": "a"}])
    view.append("r1", [{"type": "finish"}], end_leg=True)
    page = journal.read("r1")
    assert ([seq for seq, _ in page.parts], page.last_seq, page.is_closed) == ([0, 1, 2], 2, True)


def test_last_seq_is_minus_one_for_an_empty_journal_and_follows_appends(journal):
    view = journal.fenced("r1", take_over(journal, "r1"))
    before = journal.last_seq("r1")
    view.append("r1", [{"type": "start"}, {"type": "finish"}])
    assert (before, journal.last_seq("r1")) == (-1, 1)


def test_an_append_at_a_counted_seq_continues_the_journal(journal):
    view = journal.fenced("r1", take_over(journal, "r1"))
    view.append("r1", [{"type": "start"}])
    view.append("r1", [{"type": "finish"}], first_seq=1)
    assert [part["type"] for _, part in journal.read("r1").parts] == ["start", "finish"]


def test_a_stale_journal_writer_is_refused_and_appends_nothing(journal):
    stale = take_over(journal, "r1")
    take_over(journal, "r1")
    with pytest.raises(OwnershipLostError):
        journal.fenced("r1", stale).append("r1", [{"type": "start"}])
    assert journal.read("r1").last_seq == -1
