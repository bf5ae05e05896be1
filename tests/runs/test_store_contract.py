"""One contract for every SessionStore: the in-memory reference store and the database store
(SQLite by default, PostgreSQL when DATABASE_URL is set)."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync

from runs.runtime.durable import InMemorySessionStore
from runs.stores.db import DatabaseSessionStore

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


def test_async_callers_get_awaitables(store):
    async def roundtrip():
        result = store.save(checkpoint("async-run", messages=history(3)))
        if asyncio.iscoroutine(result) or hasattr(result, "__await__"):
            await result
        loaded = store.load("async-run")
        return await loaded if hasattr(loaded, "__await__") else loaded

    assert async_to_sync(roundtrip)()["messages"] == history(3)
