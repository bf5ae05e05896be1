"""GET /api/metrics/: the ledger's measures, for support and reviewers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import ApprovalRequest
from runs.models import Checkpoint, Effect, EffectTransition, JournalEntry, Leg
from tests.factories import make_run, make_suspended_run, make_user

pytestmark = pytest.mark.django_db(transaction=True)


def metrics(client) -> dict:
    response = client.get("/api/metrics/")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_clean_payment_counts_no_duplicate_and_no_unknown_outcome(approved_run, drain_runs, reviewer_client):
    approved_run()
    drain_runs()
    body = metrics(reviewer_client)
    assert (body["duplicate_effects"], body["oldest_unknown_outcome_seconds"], body["effects_by_status"]["verified"]) \
        == (0, None, 1)


def test_an_operation_whose_tool_committed_twice_counts_as_a_duplicate(reviewer_client):
    run = make_run("r1")
    effect = Effect.objects.create(run=run, operation_id="r1:c1", tool_call_id="c1", tool_name="pay",
                                   fingerprint="f" * 64, request={}, status="committed", owner_epoch=2)
    for epoch in (1, 2):
        EffectTransition.objects.create(effect=effect, from_status="attempted", to_status="committed",
                                        owner_epoch=epoch, actor_kind="worker", actor=f"w-{epoch}", via="tool")
    assert metrics(reviewer_client)["duplicate_effects"] == 1


def test_the_same_request_committed_under_two_operations_counts_as_a_duplicate(reviewer_client):
    run = make_run("r1")
    for call in ("c1", "c2"):
        Effect.objects.create(run=run, operation_id=f"r1:{call}", tool_call_id=call, tool_name="pay",
                              fingerprint="f" * 64, request={}, status="verified", owner_epoch=1)
    assert metrics(reviewer_client)["duplicate_effects"] == 1


def test_an_effect_needing_review_shows_as_the_oldest_unknown_outcome(needs_review_run, reviewer_client):
    needs_review_run()
    Effect.objects.update(unknown_since=timezone.now() - timedelta(minutes=5))
    body = metrics(reviewer_client)
    assert (body["unknown_outcomes"], body["oldest_unknown_outcome_seconds"] >= 300) == (1, True)


def test_a_resolution_counts_as_a_manual_reconciliation_and_a_recovery(needs_review_run, reviewer_client, drain_runs):
    from demo.models import SandboxPayment

    run = needs_review_run()
    effect = run.effects.get()
    reviewer_client.post(f"/api/runs/{run.run_id}/effects/{effect.operation_id}/resolve/",
                         {"action": "commit", "reason": "Seen.", "receipt": SandboxPayment.objects.get().receipt()},
                         format="json")
    drain_runs()
    body = metrics(reviewer_client)
    assert (body["manual_reconciliations"], body["reconciliation_completion_seconds"]["count"]) == (1, 1)
    assert body["reconciliation_completion_seconds"]["max"] >= 0


def _leg(run, number: int, kind: str, *, started: int, ended: int | None = None, checkpoint: int | None = None,
         part: int | None = None) -> None:
    """Leg ``number`` of ``run`` (owner epoch = number), its times in seconds after T0; with a checkpoint and a
    journal part of its epoch at those seconds."""
    leg = Leg.objects.create(run=run, number=number, kind=kind, owner_epoch=number, worker_id=f"w{number}")
    Leg.objects.filter(pk=leg.pk).update(started_at=T0 + timedelta(seconds=started),
                                         ended_at=None if ended is None else T0 + timedelta(seconds=ended))
    if checkpoint is not None:
        row = Checkpoint.objects.create(run=run, session_key=run.run_id, step_index=number, status="running",
                                        message_count=1, created_at_ms=0, owner_epoch=number)
        Checkpoint.objects.filter(pk=row.pk).update(recorded_at=T0 + timedelta(seconds=checkpoint))
    if part is not None:
        entry = JournalEntry.objects.create(run=run, seq=number, part="{}", owner_epoch=number)
        JournalEntry.objects.filter(pk=entry.pk).update(created_at=T0 + timedelta(seconds=part))


T0 = timezone.now() - timedelta(hours=1)


def test_every_recovery_leg_counts_from_the_dead_legs_last_sign_to_its_first_checkpoint(reviewer_client):
    run = make_run("r-crashes")
    _leg(run, 1, "start", started=0, checkpoint=5, part=7)  # died; last seen at 7 (a journal part)
    _leg(run, 2, "recovery", started=20, checkpoint=21, part=30)  # confirmed at 21: 14 s; died, last seen at 30
    _leg(run, 3, "recovery", started=40, ended=45)  # no checkpoint, ended at 45: 15 s
    _leg(run, 4, "retry", started=50, ended=60)  # not a recovery
    _leg(make_run("r-recovering"), 2, "recovery", started=0)  # still under way: not counted yet
    body = metrics(reviewer_client)["recovery_completion_seconds"]
    assert (body["count"], body["max"], body["mean"]) == (2, 15.0, 14.5)


def test_a_request_past_its_expiry_counts_as_an_expired_approval(drain_runs, reviewer_client):
    make_suspended_run(drain_runs, "r-wait")
    ApprovalRequest.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert metrics(reviewer_client)["expired_approvals"] == 1


def test_the_stop_switches_that_are_on_are_listed(reviewer_client):
    from runs.services.stop_switch import effects_stop

    effects_stop(agent="coder", reason="incident")
    assert [(s["agent"], s["reason"]) for s in metrics(reviewer_client)["effects_stopped"]] == [("coder", "incident")]


def test_support_reads_the_measures(client):
    client.force_login(make_user("sam", permissions=["view_every_run"]))
    assert client.get("/api/metrics/").status_code == 200


def test_a_user_who_may_not_read_every_run_is_refused(outsider_client):
    assert outsider_client.get("/api/metrics/").status_code == 403


def test_the_schema_documents_the_ledgers_paths(client):
    import json as json_module

    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    paths = set(json_module.loads(response.content)["paths"])
    assert {"/api/runs/{run_id}/effects/{operation_id}/resolve/", "/api/metrics/", "/api/effects/stop/"} <= paths
