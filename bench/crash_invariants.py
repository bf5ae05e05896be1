"""The crash matrix's invariants, checked on a case's run once it completed, and a failing case's report.

The seed's invariants: at most one committed payment (one shell command), none without approval or with other
arguments than approved; revisions monotonic, one current owner epoch, no write from an epoch after a newer one
wrote; a gapless journal with one recovery part per restarted step; a terminal receipt matching the provider,
or needs review where the outcome is truly unknown; and in a thread's later turn, its start from the previous turn's
history with that turn's effects left alone. The report holds what a person needs to see what happened
(the ledger with its transitions, the legs, checkpoints, journal, the provider's books, the workers' logs) and
the schedule that ``--replay FILE`` runs again.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from django.db import connection

from approvals.models import ApprovalRequest
from demo.models import SandboxCommand, SandboxPayment
from runs.models import Checkpoint, Effect, EffectTransition, JournalEntry, Leg, Run

if TYPE_CHECKING:
    from bench.crash_case import CaseResult
    from bench.crash_harness import Schedule

__all__ = ["case_report", "check_invariants"]


def _normalized(request: dict) -> dict:
    return {key: str(value) for key, value in (request or {}).items()}


def check_invariants(run_id: str, schedule: Schedule, *, saw_review: bool) -> list[str]:
    """The seed's invariants for one run; each broken one is a line saying what and where."""
    run = Run.objects.get(run_id=run_id)
    legs = list(Leg.objects.filter(run=run).order_by("number"))
    journal = list(JournalEntry.objects.filter(run=run).order_by("id"))
    outside = _provider_books(run_id, schedule)
    return (_approved_breaks(run, outside) + _epoch_breaks(run, legs, journal) + _journal_breaks(run, legs, journal)
            + _receipt_breaks(run, schedule, outside, saw_review=saw_review) + _thread_breaks(run, schedule))


def run_payments(run_id: str) -> list[SandboxPayment]:
    """The provider's payments for the business operations the run opened (a payment's operation id is its
    expense's, pay_expense:<expense>-v1, not the run's)."""
    operations = Effect.objects.filter(run__run_id=run_id).values("operation_id")
    return list(SandboxPayment.objects.filter(operation_id__in=operations))


def _provider_books(run_id: str, schedule: Schedule) -> list[tuple[str, dict, dict]]:
    """What happened at the provider for the run: (tool call id, request, receipt) of each payment or command."""
    if schedule.agent == "reimbursement":
        calls = dict(Effect.objects.filter(run__run_id=run_id).values_list("operation_id", "tool_call_id"))
        return [(calls[payment.operation_id], payment.request, payment.receipt()) for payment in run_payments(run_id)]
    return [(command.operation_id.rsplit(":", 1)[1], {"command": command.command}, command.result())
            for command in SandboxCommand.objects.filter(operation_id__startswith=f"{run_id}")]


def _approved_breaks(run: Run, outside: list[tuple[str, dict, dict]]) -> list[str]:
    """At most one committed payment (one shell command), none unapproved or with other arguments."""
    broken = []
    approved = {request.tool_call_id: request for request in ApprovalRequest.objects.filter(run=run)
                if request.status in {ApprovalRequest.Status.APPROVED, ApprovalRequest.Status.USED}}
    if len(outside) != 1:
        broken.append(f"{len(outside)} effects happened at the provider, not exactly one")
    for call_id, request, _ in outside:
        verdict = approved.get(call_id)
        if verdict is None:
            broken.append(f"the call {call_id} happened without an approval")
        elif any(_normalized(verdict.tool_input).get(key) != value for key, value in _normalized(request).items()):
            broken.append(f"the call {call_id} happened with other arguments than approved")
    return broken


def _epoch_breaks(run: Run, legs: list[Leg], journal: list[JournalEntry]) -> list[str]:
    """Revisions monotonic; one current owner epoch; no write from an epoch after a newer one wrote."""
    broken = []
    checkpoints = list(Checkpoint.objects.filter(run=run).order_by("id").values_list("session_key", "step_index",
                                                                                     "owner_epoch"))
    root_steps = [step for key, step, _ in checkpoints if key == run.run_id]
    if root_steps != sorted(root_steps):
        broken.append(f"root revisions went back: steps {root_steps}")
    leg_epochs = [leg.owner_epoch for leg in legs]
    if leg_epochs != sorted(set(leg_epochs)) or (legs and run.owner_epoch != leg_epochs[-1]):
        broken.append(f"owner epochs not one increasing line: legs {leg_epochs}, run {run.owner_epoch}")
    transitions = list(EffectTransition.objects.filter(effect__run=run, actor_kind="worker").order_by("id"))
    for what, epochs in (("checkpoints", [epoch for _, _, epoch in checkpoints]),
                         ("journal", [entry.owner_epoch for entry in journal]),
                         ("ledger", [transition.owner_epoch for transition in transitions])):
        if epochs != sorted(epochs):
            broken.append(f"a stale epoch wrote the {what} after a newer one: {epochs}")
        if epochs and max(epochs) > run.owner_epoch:
            broken.append(f"the {what} hold an epoch beyond the run's")
    return broken


def _journal_breaks(run: Run, legs: list[Leg], journal: list[JournalEntry]) -> list[str]:
    """A gapless journal with one recovery part per restarted step."""
    broken = []
    seqs = [entry.seq for entry in journal if not entry.is_sentinel]
    if seqs != list(range(len(seqs))):
        broken.append(f"the journal has gaps or repeats: {seqs[:40]}")
    parts = [entry.decoded_part for entry in journal if not entry.is_sentinel]
    recoveries = sum(1 for part in parts if part.get("type") == "recovery")
    expected = _restarted_steps(run, legs)
    if recoveries != expected:
        broken.append(f"{recoveries} recovery parts for {expected} restarted steps")
    return broken


def _receipt_breaks(run: Run, schedule: Schedule, outside: list[tuple[str, dict, dict]], *,
                    saw_review: bool) -> list[str]:
    """A terminal receipt matching the provider, or needs review where the outcome is truly unknown."""
    broken = []
    if run.status != Run.Status.COMPLETED:
        broken.append(f"the run ended {run.status}, not completed")
    if schedule.is_truly_unknown and not saw_review:
        broken.append("the outcome was unknowable, yet the run never asked a person")
    if saw_review and schedule.provider == "normal":
        broken.append("the run asked a person although the provider could be read")
    tool = "pay_expense" if schedule.agent == "reimbursement" else "run_shell"
    mine = list(Effect.objects.filter(run=run, tool_name=tool).order_by("id"))
    if len(mine) != 1:
        broken.append(f"{len(mine)} ledger entries for {tool}, not one")
    elif outside:
        effect, (_, _, receipt) = mine[0], outside[0]
        if effect.status not in {Effect.Status.VERIFIED, Effect.Status.COMMITTED}:
            broken.append(f"the ledger says {effect.status}, not committed or verified")
        key = "transaction_id" if tool == "pay_expense" else "output"
        if not isinstance(effect.receipt, dict) or effect.receipt.get(key) != receipt.get(key):
            broken.append("the ledger's receipt does not match the provider's")
        if tool == "pay_expense" and receipt.get("transaction_id", "-") not in _final_text(run.run_id):
            broken.append("the final answer does not name the provider's transaction")
    return broken


def _thread_breaks(run: Run, schedule: Schedule) -> list[str]:
    """A later turn started from the previous turn's whole history (its tool calls and results included), and did
    not redo the previous turn's effects."""
    if schedule.turn == 1:
        return []
    from runs.selectors import run_latest_messages

    if run.thread_id is None or run.turn != schedule.turn:
        return [f"the run is turn {run.turn} of thread {run.thread_id}, not turn {schedule.turn} of a thread"]
    previous = Run.objects.get(thread_id=run.thread_id, turn=run.turn - 1)
    broken = []
    before = run_latest_messages(run=previous)
    if run_latest_messages(run=run)[:len(before)] != before:
        broken.append("the turn did not start from the previous turn's whole history")
    if not any(message["role"] == "tool" for message in before):
        broken.append("the previous turn's history holds no tool result to carry over")
    paid_before = len(run_payments(previous.run_id))
    if paid_before != 1:
        broken.append(f"the previous turn's payment happened {paid_before} times at the provider, not once")
    if Effect.objects.filter(run=run, operation_id__in=previous.effects.values("operation_id")).exists():
        broken.append("the turn opened an operation of the previous turn again")
    return broken


def _restarted_steps(run: Run, legs: list[Leg]) -> int:
    """Recovery legs that restarted a step: all but those that found the run complete, or still waiting for a
    verdict."""
    count = 0
    for leg in legs:
        if leg.kind != Leg.Kind.RECOVERY:
            continue
        latest = Checkpoint.objects.filter(run=run, session_key=run.run_id,
                                           recorded_at__lt=leg.started_at).order_by("-id").first()
        if latest is not None and latest.status == "completed":
            continue  # the dead leg had finished the run; this one only closes it
        if latest is not None and latest.status == "suspended" and ApprovalRequest.objects.filter(
                revision=latest).exclude(decided_at__lt=leg.started_at).exists():
            continue  # it found the run still waiting for a verdict: it said so again, nothing restarted
        count += 1
    return count


def _final_text(run_id: str) -> str:
    from runs.presenters.receipt import run_final_text

    return run_final_text(Run.objects.get(run_id=run_id)) or ""


def case_report(result: CaseResult, run_id: str) -> dict[str, Any]:
    """A failing case's schedule and ledger, enough to see what happened and to replay the schedule."""
    run = Run.objects.filter(run_id=run_id).first()
    if run is None:
        return {"schedule": asdict(result.schedule), "violations": result.violations}
    return {
        "schedule": asdict(result.schedule),
        "case": result.schedule.name,
        "database": connection.vendor,
        "run_id": run_id,
        "violations": result.violations,
        "run": {"status": run.status, "error": run.error, "owner_epoch": run.owner_epoch},
        "ledger": [
            {"operation_id": effect.operation_id, "status": effect.status, "attempts": effect.attempts,
             "receipt": effect.receipt, "error": effect.error,
             "transitions": [{"from": t.from_status, "to": t.to_status, "epoch": t.owner_epoch,
                              "actor": f"{t.actor_kind} {t.actor}", "via": t.via, "note": t.note,
                              "evidence": t.evidence, "at": t.at.isoformat()}
                             for t in effect.transitions.order_by("id")]}
            for effect in run.effects.order_by("id")
        ],
        "legs": list(run.legs.order_by("number").values("number", "kind", "owner_epoch", "worker_id",
                                                         "finish_reason", "error")),
        "checkpoints": list(run.checkpoints.order_by("id").values("session_key", "step_index", "status",
                                                                  "owner_epoch")),
        "journal": [None if entry.is_sentinel else entry.decoded_part.get("type")
                    for entry in run.journal.order_by("id")],
        "provider": [payment.receipt() for payment in run_payments(run_id)]
        + [command.result() for command in SandboxCommand.objects.filter(operation_id__startswith=run_id)],
        "worker_logs": result.logs,
    }

