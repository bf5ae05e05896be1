"""The in-memory session store: the reference semantics of SessionStore (latest save wins per run)."""

from __future__ import annotations

from typing import Any

import pytest

from runs.runtime.durable import SessionStore, create_in_memory_session_store


def checkpoint(run_id: str, step_index: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "run_id": run_id,
        "step_id": f"{run_id}#{step_index}",
        "step_index": step_index,
        "status": "running",
        "messages": [{"role": "user", "content": f"hello from {run_id}"}],
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        "created_at": 1_000 + step_index,
        **extra,
    }


@pytest.fixture
def store():
    return create_in_memory_session_store()


def test_store_satisfies_the_session_store_protocol():
    assert isinstance(create_in_memory_session_store(), SessionStore)


def test_load_of_an_unknown_run_is_none(store):
    store.save(checkpoint("run-a"))
    assert store.load("run-unknown") is None


def test_load_returns_what_was_saved(store):
    store.save(checkpoint("run-a"))
    assert store.load("run-a") == checkpoint("run-a")


def test_latest_save_wins_per_run(store):
    store.save(checkpoint("run-a", 0))
    store.save(checkpoint("run-a", 2))
    store.save(checkpoint("run-a", 1))
    assert store.load("run-a") == checkpoint("run-a", 1)


def test_runs_are_independent(store):
    store.save(checkpoint("run-a", 0))
    store.save(checkpoint("run-b", 5))
    store.save(checkpoint("run-a", 1))
    assert store.load("run-a") == checkpoint("run-a", 1)
    assert store.load("run-b") == checkpoint("run-b", 5)


def test_stores_are_independent():
    first, second = create_in_memory_session_store(), create_in_memory_session_store()
    first.save(checkpoint("run-a"))
    assert second.load("run-a") is None


def test_delete_removes_the_run(store):
    store.save(checkpoint("run-a"))
    store.delete("run-a")
    assert store.load("run-a") is None
    assert "run-a" not in store.list()


def test_delete_leaves_other_runs(store):
    store.save(checkpoint("run-a"))
    store.save(checkpoint("run-b"))
    store.delete("run-a")
    assert store.load("run-b") == checkpoint("run-b")


def test_delete_of_an_unknown_run_is_a_no_op(store):
    store.save(checkpoint("run-a"))
    store.delete("run-unknown")
    assert store.list() == ["run-a"]


def test_list_enumerates_each_stored_run_id_once(store):
    store.save(checkpoint("run-a", 0))
    store.save(checkpoint("run-b", 0))
    store.save(checkpoint("run-a", 1))
    assert sorted(store.list()) == ["run-a", "run-b"]


def test_list_of_an_empty_store_is_empty():
    assert create_in_memory_session_store().list() == []


def test_mutating_the_saved_dict_afterwards_does_not_change_what_load_returns(store):
    saved = checkpoint("run-a", 0)
    store.save(saved)
    saved["status"] = "completed"
    saved["step_index"] = 9
    saved["messages"] = []
    saved["pending_approvals"] = [{"approval_id": "appr_1"}]
    assert store.load("run-a") == checkpoint("run-a", 0)


def test_mutating_a_loaded_dict_does_not_change_the_next_load(store):
    store.save(checkpoint("run-a", 0))
    loaded = store.load("run-a")
    loaded["status"] = "completed"
    del loaded["messages"]
    assert store.load("run-a") == checkpoint("run-a", 0)
