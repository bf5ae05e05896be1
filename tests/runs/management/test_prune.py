"""`runs prune`: finished runs lose their journal, checkpoints and messages after a while, never their receipt."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.management import CommandError
from django.utils import timezone

from approvals.models import ApprovalRequest
from runs.models import Checkpoint, JournalEntry, Run, RunMessage
from tests.commands import runs_cli
from tests.factories import make_paid_run, make_suspended_run

pytestmark = pytest.mark.django_db(transaction=True)


def age(run: Run, days: int) -> None:
    Run.objects.filter(pk=run.pk).update(updated_at=timezone.now() - timedelta(days=days))


@pytest.fixture
def old_paid_run(drain_runs) -> Run:
    run = make_paid_run(drain_runs, "old-paid")
    age(run, 40)
    return run


def records(run: Run) -> tuple[int, int, int]:
    return (JournalEntry.objects.filter(run=run).count(), Checkpoint.objects.filter(run=run).count(),
            RunMessage.objects.filter(run=run).count())


def test_prune_removes_an_old_finished_runs_journal_checkpoints_and_messages(old_paid_run):
    runs_cli("prune", "--older-than", "30")
    assert records(old_paid_run) == (0, 0, 0)


def test_a_pruned_run_still_exports_the_receipt_it_had(old_paid_run):
    before = json.loads(runs_cli("export", "old-paid"))
    runs_cli("prune", "--older-than", "30")
    after = json.loads(runs_cli("export", "old-paid"))
    assert (after["final_text"], after["effects"], after["checkpoints"]) == (
        before["final_text"], before["effects"], before["checkpoints"]) and after["final_text"]


def test_prune_keeps_the_approval_requests_as_the_audit_trail(old_paid_run):
    runs_cli("prune", "--older-than", "30")
    assert ApprovalRequest.objects.filter(run=old_paid_run, status="used").count() == 1


def test_a_dry_run_counts_and_removes_nothing(old_paid_run):
    kept = records(old_paid_run)
    parts = JournalEntry.objects.filter(run=old_paid_run, is_sentinel=False).count()
    output = runs_cli("prune", "--older-than", "30", "--dry-run")
    assert records(old_paid_run) == kept and f"would remove {parts} journal parts" in output


def test_prune_leaves_recent_and_unfinished_runs_alone(drain_runs, old_paid_run):
    waiting = make_suspended_run(drain_runs, "old-waiting").run
    age(waiting, 40)
    recent = make_paid_run(drain_runs, "recent-paid")
    kept = records(waiting), records(recent)
    runs_cli("prune", "--older-than", "30")
    assert (records(waiting), records(recent)) == kept


def test_prune_reports_progress_batch_by_batch(drain_runs):
    for name in ("p1", "p2", "p3"):
        age(make_paid_run(drain_runs, name), 40)
    output = runs_cli("prune", "--older-than", "30", "--batch-size", "2")
    assert [line.split(":")[0] for line in output.splitlines() if "runs:" in line] == ["2/3 runs", "3/3 runs"]


def test_a_negative_age_is_refused_with_a_clear_message():
    with pytest.raises(CommandError, match="0 or more days"):
        runs_cli("prune", "--older-than", "-1")
