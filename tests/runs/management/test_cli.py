"""`manage.py runs`: the operators' list, show, follow, resume, cancel and export."""

from __future__ import annotations

import json
import time

import pytest
from django.core.management.base import CommandError
from django.utils import timezone

from approvals.models import ApprovalRequest
from runs.models import Leg, Run
from tests.commands import runs_cli
from tests.factories import make_paid_run, make_queued_run, make_suspended_run, make_user


@pytest.fixture
def suspended_run(drain_runs) -> Run:
    return make_suspended_run(drain_runs, "r-wait").run


@pytest.fixture
def paid_run(drain_runs) -> Run:
    return make_paid_run(drain_runs, "r-paid")


def _rows(output: str) -> dict[str, list[str]]:
    """The table's data rows by their first column."""
    return {line.split()[0]: line.split() for line in output.splitlines()[2:]}


# -------------------------------------------------------------------- list


@pytest.mark.django_db
def test_list_shows_every_run_with_its_status():
    make_queued_run("r-one")
    make_queued_run("r-two")
    Run.objects.filter(run_id="r-two").update(status="failed")
    rows = _rows(runs_cli("list"))
    assert rows["r-one"][:3] == ["r-one", "reimbursement", "queued"]
    assert rows["r-two"][:3] == ["r-two", "reimbursement", "failed"]


@pytest.mark.django_db
def test_list_filters_by_status():
    make_queued_run("r-one")
    make_queued_run("r-two")
    Run.objects.filter(run_id="r-two").update(status="failed")
    assert set(_rows(runs_cli("list", "--status", "failed"))) == {"r-two"}


@pytest.mark.django_db
def test_list_filters_by_agent():
    make_queued_run("r-pay")
    make_queued_run("r-code", agent="coder")
    assert set(_rows(runs_cli("list", "--agent", "coder"))) == {"r-code"}


@pytest.mark.django_db
def test_list_stops_at_the_limit_newest_first():
    for number in range(3):
        make_queued_run(f"r-{number}")
    assert list(_rows(runs_cli("list", "--limit", "2"))) == ["r-2", "r-1"]


@pytest.mark.django_db
def test_list_rejects_an_unknown_status():
    with pytest.raises(CommandError, match="invalid choice"):
        runs_cli("list", "--status", "sleeping")


# -------------------------------------------------------------------- show


@pytest.mark.django_db(transaction=True)
def test_show_names_the_pending_tool_and_its_input(suspended_run):
    output = runs_cli("show", "r-wait")
    assert "Waiting for review" in output
    assert "pay_expense" in output
    assert '"amount": "84.20"' in output and '"expense_id": "exp-1042"' in output


@pytest.mark.django_db(transaction=True)
def test_show_lists_the_legs_with_their_epochs_and_the_effect(paid_run):
    output = runs_cli("show", "r-paid")
    legs = output.split("Legs")[1].split("Effects")[0]
    assert [line.split()[:3] for line in legs.splitlines()[3:5]] == [["1", "start", "1"], ["2", "verdict", "2"]]
    assert paid_run.effects.get().operation_id in output.split("Effects")[1]


@pytest.mark.django_db
def test_show_gives_the_reason_a_run_failed():
    make_queued_run("r-bad")
    Run.objects.filter(run_id="r-bad").update(status="failed", error="RuntimeError: the model API is down")
    assert "Why:      RuntimeError: the model API is down" in runs_cli("show", "r-bad")


# ---------------------------------------------------------- resume, cancel


@pytest.mark.django_db(transaction=True)
def test_resume_queues_a_failed_run(paid_run):
    Run.objects.filter(run_id="r-paid").update(status="failed")
    runs_cli("resume", "r-paid")
    assert Run.objects.get(run_id="r-paid").status == "queued"


@pytest.mark.django_db(transaction=True)
def test_resume_of_a_completed_run_is_refused(paid_run):
    with pytest.raises(CommandError, match="Only failed runs"):
        runs_cli("resume", "r-paid")
    assert Run.objects.get(run_id="r-paid").status == "completed"


@pytest.mark.django_db(transaction=True)
def test_cancel_cancels_a_suspended_run(suspended_run):
    runs_cli("cancel", "r-wait")
    assert Run.objects.get(run_id="r-wait").status == "cancelled"


def _journal(run_id: str) -> list[dict]:
    from runs.models import JournalEntry

    rows = JournalEntry.objects.filter(run__run_id=run_id, is_sentinel=False).order_by("seq")
    return [row.decoded_part for row in rows]


@pytest.mark.django_db(transaction=True)
def test_the_cli_records_the_user_it_is_given_and_the_reason():
    make_queued_run("r1")
    operator = make_user("opal")
    runs_cli("cancel", "r1", "--as", "opal", "--reason", "Duplicate run.")
    run = Run.objects.get(run_id="r1")
    assert (run.status, run.cancelled_by, run.cancel_reason) == ("cancelled", operator, "Duplicate run.")
    assert _journal("r1")[0] == {"type": "cancelled", "by": "opal", "reason": "Duplicate run."}


@pytest.mark.django_db(transaction=True)
def test_the_cli_without_a_user_cancels_as_the_system():
    make_queued_run("r1")
    runs_cli("cancel", "r1")
    assert _journal("r1")[0] == {"type": "cancelled", "by": None, "reason": ""}


@pytest.mark.django_db(transaction=True)
def test_the_cli_refuses_a_user_that_does_not_exist_and_cancels_nothing():
    make_queued_run("r1")
    with pytest.raises(CommandError, match="No user named"):
        runs_cli("cancel", "r1", "--as", "nobody")
    assert Run.objects.get(run_id="r1").status == "queued"


# -------------------------------------------------------------------- export


@pytest.mark.django_db(transaction=True)
def test_export_prints_the_recovery_receipt(paid_run):
    receipt = json.loads(runs_cli("export", "r-paid"))
    assert receipt["receipt_version"] == 1
    assert receipt["run"]["run_id"] == "r-paid" and receipt["run"]["status"] == "completed"
    assert [(leg["kind"], leg["owner_epoch"]) for leg in receipt["legs"]] == [("start", 1), ("verdict", 2)]
    assert receipt["checkpoints"][-1]["step_id"] == "r-paid#2" and "messages" not in receipt["checkpoints"][-1]
    assert receipt["final_text"].startswith("Paid 84.20 EUR to Ada Lovelace")
    assert receipt["generated_at"]


@pytest.mark.django_db(transaction=True)
def test_export_records_the_effect_with_its_operation_id_and_fingerprint(paid_run):
    effect = paid_run.effects.get()
    [exported] = json.loads(runs_cli("export", "r-paid"))["effects"]
    assert exported["operation_id"] == effect.operation_id
    assert exported["request_fingerprint"] == effect.fingerprint
    assert exported["status"] == "verified"
    assert exported["receipt"]["transaction_id"].startswith("tx-")


@pytest.mark.django_db(transaction=True)
def test_export_holds_the_verdict_but_never_the_token(paid_run):
    request = ApprovalRequest.objects.get(run=paid_run)
    output = runs_cli("export", "r-paid")
    [approval] = json.loads(output)["approvals"]
    assert request.token not in output
    assert len(approval["token_sha256"]) == 64
    assert (approval["tool_name"], approval["status"], approval["revision"]) == ("pay_expense", "used", "r-paid#1")


@pytest.mark.django_db(transaction=True)
def test_export_writes_the_receipt_to_a_file(paid_run, tmp_path):
    target = tmp_path / "receipt.json"
    runs_cli("export", "r-paid", "-o", str(target))
    assert json.loads(target.read_text())["run"]["run_id"] == "r-paid"


# -------------------------------------------------------------------- follow


@pytest.mark.django_db(transaction=True)
def test_follow_prints_the_final_text_and_exits_when_the_run_is_complete(paid_run):
    started = time.monotonic()
    output = runs_cli("follow", "r-paid", "--timeout", "5")
    assert time.monotonic() - started < 2
    assert "Paid 84.20 EUR to Ada Lovelace" in output
    assert output.rstrip().endswith("Run r-paid completed.")


@pytest.mark.django_db(transaction=True)
def test_follow_prints_the_runs_journal_step_by_step(paid_run):
    output = runs_cli("follow", "r-paid")
    steps = [line for line in output.splitlines() if line.startswith("step ")]
    assert steps == ["step 0:", "step 1:", "step 2:"]
    assert "approval needed: pay_expense" in output and "<- pay_expense result:" in output


@pytest.mark.django_db(transaction=True)
def test_follow_marks_a_sub_agents_tool_calls_with_its_path(drain_runs):
    make_queued_run("r-code", agent="coder")
    drain_runs()
    output = runs_cli("follow", "r-code", "--timeout", "5")
    assert "  -> [coder] run_shell" in output
    assert [line for line in output.splitlines() if line.startswith("step ")] == ["step 0:"]


@pytest.mark.django_db(transaction=True)
def test_follow_of_a_suspended_run_prints_the_pending_approvals(suspended_run):
    output = runs_cli("follow", "r-wait", "--timeout", "5")
    assert "is waiting for review (1 pending)" in output
    assert '"expense_id": "exp-1042"' in output.split("waiting for review")[1]


@pytest.mark.django_db
def test_follow_of_a_failed_run_fails_with_the_reason():
    make_queued_run("r-bad")
    Run.objects.filter(run_id="r-bad").update(status="failed", error="RuntimeError: the model API is down")
    with pytest.raises(CommandError, match="the model API is down") as failure:
        runs_cli("follow", "r-bad")
    assert failure.value.returncode == 1


@pytest.mark.django_db
def test_follow_gives_up_at_the_timeout():
    make_queued_run("r-queued")  # no worker drains it
    with pytest.raises(CommandError, match="still queued") as failure:
        runs_cli("follow", "r-queued", "--timeout", "0.2", "--interval", "0.05")
    assert failure.value.returncode == 124


# -------------------------------------------------------------------- errors


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["show", "follow", "resume", "cancel", "export"])
def test_an_unknown_run_id_is_a_command_error(action):
    with pytest.raises(CommandError, match=r"^No run 'nope'\.$"):
        runs_cli(action, "nope")


# -------------------------------------------------------------------- fork


@pytest.mark.django_db(transaction=True)
def test_fork_starts_a_new_run_from_a_checkpoint_that_runs_to_completion(paid_run, drain_runs):
    rita = make_user("rita", "reviewers")
    output = runs_cli("fork", "r-paid", "1", "--as", "rita")
    assert output.strip() == ("Run r-paid-fork-1 forked from step 1 of run r-paid; it is queued and a worker will "
                              "pick it up.")
    drain_runs()
    fork = Run.objects.get(run_id="r-paid-fork-1")
    assert (fork.forked_from, fork.forked_from_step, fork.created_by, fork.status) == (paid_run, 1, rita, "completed")
    assert "Forked:   from r-paid, step 1" in runs_cli("show", "r-paid-fork-1")


@pytest.mark.django_db(transaction=True)
def test_fork_takes_the_new_runs_id(paid_run):
    runs_cli("fork", "r-paid", "0", "--run-id", "again-1")
    assert Run.objects.get(run_id="again-1").forked_from == paid_run


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("args", "says"), [
    (("r-paid", "9"), "has no checkpoint of step 9"),
    (("nobody", "0"), "No run 'nobody'"),
    (("r-paid", "0", "--run-id", "r-paid"), "A run 'r-paid' exists already"),
    (("r-paid", "0", "--run-id", "bad id"), "A run id is 1-200 characters"),
    (("r-paid", "0", "--as", "ghost"), "No user named 'ghost'"),
])
def test_fork_refusals_are_command_errors_and_fork_nothing(paid_run, args, says):
    with pytest.raises(CommandError, match=says):
        runs_cli("fork", *args)
    assert Run.objects.count() == 1


@pytest.mark.django_db
def test_export_tells_an_interrupted_leg_with_when_its_death_was_detected():
    run = make_queued_run("r-crashed")
    Leg.objects.create(run=run, number=1, kind="start", owner_epoch=1, worker_id="vm:1")
    Leg.objects.create(run=run, number=2, kind="recovery", owner_epoch=2, worker_id="vm:2",
                       ended_at=timezone.now(), finish_reason="stop")
    Run.objects.filter(pk=run.pk).update(status="completed", owner_epoch=2)
    first, second = json.loads(runs_cli("export", "r-crashed"))["legs"]
    assert (first["state"], first["ended_at"], second["state"], second["interruption"]) == (
        "interrupted", None, "finished", None)
    told = first["interruption"]
    assert (told["next_leg"], told["last_step"]) == (2, None) and told["gap_seconds"] >= 0
    assert told["detected_at"] == Leg.objects.get(run=run, number=2).started_at.isoformat()
    assert "recovered" in told["text"] and "by worker vm:2 (leg 2)" in told["text"]
