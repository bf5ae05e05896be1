"""Workers are real processes here: one is SIGKILLed mid-run, and taken over at once though its lease is long;
one is frozen for less than its lease, and kept; another is frozen past its lease."""

from __future__ import annotations

import signal
import time

import pytest

from approvals.models import ApprovalRequest
from demo.models import SandboxPayment
from runs.models import Checkpoint, Effect, Leg, Run
from runs.ownership.liveness import liveness_owners_dead
from runs.stores.sessions import DatabaseSessionStore
from tests.factories import make_queued_run, verdict
from tests.processes import freeze_between_transactions, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

#: A lease no test waits out: a run taken over under it was taken for its owner's death, not its lease.
LONG_LEASE = "60"


def status(run_id: str) -> str:
    return Run.objects.get(run_id=run_id).status


def epochs_and_steps(run_id: str) -> list[tuple[int, int, str]]:
    return list(Checkpoint.objects.filter(session_key=run_id).order_by("id").values_list("owner_epoch", "step_index", "status"))


def legs(run_id: str) -> list[tuple[str, int, str]]:
    return list(Leg.objects.filter(run__run_id=run_id).values_list("kind", "owner_epoch", "worker_id"))


def mid_run_beside_another(workers, run_id: str, *, delay_ms: str):
    """A run that one of two workers (a long lease each, a step streamed every ``delay_ms``) is running past its
    first checkpoint, the other claiming beside it: (owner, other). Both are up before the run is queued (a
    worker's start-up on a loaded machine takes longer than a slow run)."""
    pair = [workers(name, DEUZ_LEASE_SECONDS=LONG_LEASE, DEUZ_DEMO_DELAY_MS=delay_ms) for name in ("a", "b")]
    wait_until(lambda: not liveness_owners_dead({"a", "b"}), what="both workers to hold their liveness tokens")
    make_queued_run(run_id)
    wait_until(lambda: Checkpoint.objects.filter(session_key=run_id).exists(), what="the run's first checkpoint")
    run = Run.objects.get(run_id=run_id)
    assert run.status == "running"
    owner, other = pair if run.worker_id == "a" else pair[::-1]
    return owner, other


def test_a_killed_workers_run_is_finished_by_another_with_no_step_lost_or_repeated(workers):
    make_queued_run("crash-1")
    first = workers("a", DEUZ_FAULT="after-step-checkpoint:1", DEUZ_LEASE_SECONDS=LONG_LEASE)
    assert first.wait_exit() == -signal.SIGKILL
    second = workers("b", DEUZ_LEASE_SECONDS=LONG_LEASE)
    # Well within the lease: b finds a's liveness token free.
    wait_until(lambda: status("crash-1") == "suspended", timeout=40, what="the second worker to reach the approval")
    second.stop()
    # Epoch 1 closed step 0 and died; epoch 2 went on with step 1 and never redid step 0.
    assert epochs_and_steps("crash-1") == [(1, 0, "running"), (1, 0, "running"), (2, 1, "running"), (2, 1, "suspended")]
    assert list(Leg.objects.filter(run__run_id="crash-1").values_list("kind", "owner_epoch")) == [("start", 1), ("recovery", 2)]


def test_a_killed_workers_run_is_taken_over_within_seconds_not_at_its_lease(workers):
    first, second = mid_run_beside_another(workers, "liveness-1", delay_ms="300")
    first.signal(signal.SIGKILL)
    first.wait_exit()
    killed = time.monotonic()
    wait_until(lambda: len(legs("liveness-1")) == 2, timeout=30, every=0.05, what="b to take the run over")
    # Two cores shared with other tests: well under the lease, not the bench's figure (manage.py bench --parts
    # takeover measures it).
    assert time.monotonic() - killed < 5
    assert legs("liveness-1") == [("start", 1, first.name), ("recovery", 2, second.name)]
    wait_until(lambda: status("liveness-1") == "suspended", what="b to reach the approval")
    second.stop()


def test_a_worker_stopped_for_less_than_its_lease_keeps_its_run(workers):
    paused, other = mid_run_beside_another(workers, "paused-1", delay_ms="150")
    freeze_between_transactions(paused, "paused-1")
    time.sleep(3)  # six looks at the owners of running runs by the other worker
    assert legs("paused-1") == [("start", 1, paused.name)]  # frozen, it still holds its liveness token
    paused.signal(signal.SIGCONT)
    wait_until(lambda: status("paused-1") == "suspended", what="the paused worker to reach the approval")
    other.stop()
    assert legs("paused-1") == [("start", 1, paused.name)]
    assert {epoch for epoch, _, _ in epochs_and_steps("paused-1")} == {1}


def test_a_payment_committed_before_a_crash_is_reconciled_not_repeated(workers):
    make_queued_run("crash-2")
    before = workers("a")
    wait_until(lambda: status("crash-2") == "suspended", what="the approval request")
    before.stop()
    verdict(ApprovalRequest.objects.get(run__run_id="crash-2"))
    dies = workers("b", DEUZ_FAULT="after-effect-commit")
    assert dies.wait_exit() == -signal.SIGKILL
    workers("c")
    wait_until(lambda: status("crash-2") == "completed", what="the run to complete")
    effect = Effect.objects.get(run__run_id="crash-2")
    assert (SandboxPayment.objects.count(), effect.status, effect.outcome_source) == (1, "verified", "reconciliation")
    final = DatabaseSessionStore().load("crash-2")["messages"][-1]["content"][0]["text"]
    assert effect.receipt["transaction_id"] in final


def test_a_stale_worker_woken_after_its_lease_has_every_write_rejected(workers):
    make_queued_run("stale-1")
    stale = workers("stale", DEUZ_DEMO_DELAY_MS="150")
    wait_until(lambda: Checkpoint.objects.filter(session_key="stale-1").exists(), what="the first checkpoint")
    freeze_between_transactions(stale, "stale-1")
    frozen_at = Checkpoint.objects.filter(session_key="stale-1").count()
    fresh = workers("fresh")
    wait_until(lambda: len(legs("stale-1")) == 2, what="the new owner to take the run over")
    # Taken over for its lease (the tests' workers keep 2 s), not for its death: frozen, it holds its liveness token.
    assert legs("stale-1") == [("start", 1, "stale"), ("recovery", 2, "fresh")]
    assert liveness_owners_dead({"stale"}) == set()
    wait_until(lambda: status("stale-1") == "suspended", what="the new owner to reach the approval")
    fresh.stop()
    stale.signal(signal.SIGCONT)
    wait_until(lambda: "abandons" in stale.output or "abandoned" in stale.output, what="the stale worker to give up")
    rows = epochs_and_steps("stale-1")
    first_new = next(i for i, (epoch, _, _) in enumerate(rows) if epoch == 2)
    assert all(epoch == 1 for epoch, _, _ in rows[:first_new]) and all(epoch == 2 for epoch, _, _ in rows[first_new:])
    assert first_new == frozen_at
    assert Run.objects.get(run_id="stale-1").owner_epoch == 2 and status("stale-1") == "suspended"


def test_cancelling_a_running_run_stops_it_before_its_next_model_call(workers):
    from runs.services.lifecycle import run_cancel

    make_queued_run("cancel-1", agent="coder")
    workers("slow", DEUZ_DEMO_DELAY_MS="300")
    wait_until(lambda: status("cancel-1") == "running", what="the worker to claim the run")
    run_cancel(run_id="cancel-1")
    wait_until(lambda: status("cancel-1") == "cancelled", what="the leg to stop")
    run = Run.objects.get(run_id="cancel-1")
    # The first step streams slowly; it was interrupted, so no step closed and no approval was asked.
    assert (run.finish_reason, run.step_index, run.approval_requests.count()) == ("cancelled", -1, 0)
