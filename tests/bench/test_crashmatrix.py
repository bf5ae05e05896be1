"""`manage.py crashmatrix`: real worker processes SIGKILLed (or frozen) at every fault point, on the test
database, with the seed's invariants checked; a failing case's schedule and ledger are written and replayable."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

pytestmark = pytest.mark.django_db(transaction=True)


def crashmatrix(*args: str) -> str:
    out = StringIO()
    try:
        call_command("crashmatrix", "--database", "current", *args, stdout=out)
    except CommandError as exc:
        raise AssertionError(f"{exc}\n{out.getvalue()}") from None
    return out.getvalue()


@pytest.mark.timeout(300)  # a dozen cases of real worker processes; about a minute on an idle machine
def test_the_quick_crash_matrix_keeps_every_invariant_with_real_worker_processes(tmp_path):
    output = crashmatrix("--quick", "--failures", str(tmp_path))
    assert "11 passed, 0 failed, 0 not reached" in output
    assert output.count("] reimbursement/") + output.count("] coder/") == 11  # a progress line per case


@pytest.mark.timeout(180)
def test_the_crash_matrix_runs_a_case_inside_a_threads_second_turn(tmp_path):
    output = crashmatrix("--quick", "--only", "thread-turn-2", "--failures", str(tmp_path))
    assert "] reimbursement/after-effect-commit:1/approve-before/worker/thread-turn-2 ... pass" in output
    assert "1 passed, 0 failed, 0 not reached" in output


def test_the_checker_reports_a_second_turn_that_did_not_start_from_the_first_turns_history():
    import json as json_

    from bench.crash_harness import Schedule
    from bench.crash_invariants import check_invariants
    from runs.models import Thread
    from tests.factories import make_run

    thread = Thread.objects.create(thread_id="cm-thread", agent="reimbursement")
    first = [{"role": "user", "content": "Reimburse exp-1"},
             {"role": "assistant", "content": [{"type": "tool_call", "tool_call_id": "c1", "tool_name": "lookup_expense",
                                                "input": {"expense_id": "exp-1"}}]},
             {"role": "tool", "content": [{"type": "tool_result", "tool_call_id": "c1", "tool_name": "lookup_expense",
                                           "output": {"amount": "1"}, "is_error": False}]}]
    make_run("cm-t1", status="completed", thread=thread, turn=1, input_messages=json_.dumps(first))
    make_run("cm-y", status="completed", thread=thread, turn=2,
             input_messages=json_.dumps([{"role": "user", "content": "Reimburse exp-2"}]))  # the history forgotten
    assert "the turn did not start from the previous turn's whole history" in check_invariants(
        "cm-y", Schedule(turn=2), saw_review=False)


def test_a_case_that_breaks_an_invariant_writes_its_schedule_and_ledger_and_replays(tmp_path, monkeypatch):
    from bench import crash_case

    monkeypatch.setattr(crash_case, "check_invariants", lambda run_id, schedule, saw_review: ["made to fail"])
    with pytest.raises(AssertionError, match="1 of 1 cases broke an invariant"):
        crashmatrix("--quick", "--only", "after-effect-record", "--failures", str(tmp_path))
    [written] = list(tmp_path.glob("*.json"))
    report = json.loads(written.read_text())
    assert report["violations"] == ["made to fail"]
    assert report["schedule"]["fault"] == "after-effect-record"
    assert [t["to"] for t in report["ledger"][0]["transitions"]][:2] == ["proposed", "approved"]
    monkeypatch.undo()
    assert "1 passed, 0 failed" in crashmatrix("--replay", str(written), "--failures", str(tmp_path / "again"))


def test_the_checker_reports_a_second_payment(tmp_path):
    from bench.crash_harness import Schedule
    from bench.crash_invariants import check_invariants
    from demo.models import SandboxPayment
    from runs.models import Effect
    from tests.factories import make_run

    run = make_run("cm-x", status="completed")
    for call in ("c1", "c2"):  # two payments the run's own operations made (two expenses, two operation ids)
        operation_id = f"pay_expense:exp-{call}-v1"
        Effect.objects.create(run=run, operation_id=operation_id, tool_call_id=call, tool_name="pay_expense",
                              fingerprint="f", request={}, status="committed", owner_epoch=1)
        SandboxPayment.objects.create(operation_id=operation_id, fingerprint="f", request={},
                                      transaction_id=f"tx-{call}")
    assert "2 effects happened at the provider, not exactly one" in check_invariants(
        "cm-x", Schedule(), saw_review=False)


def test_a_replay_file_that_is_not_a_schedule_is_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"nothing": 1}))
    with pytest.raises(CommandError, match="holds no crash matrix schedule"):
        call_command("crashmatrix", "--database", "current", "--replay", str(bad), stdout=StringIO())


def test_postgres_needs_a_server_to_create_its_scratch_database_on(monkeypatch):
    monkeypatch.delenv("DEUZ_CRASHMATRIX_POSTGRES_URL", raising=False)
    monkeypatch.setenv("DATABASE_URL", "sqlite:////tmp/not-postgres.sqlite3")
    with pytest.raises(CommandError, match="needs --postgres-url"):
        call_command("crashmatrix", "--database", "postgres", "--postgres-url", "", stdout=StringIO())
