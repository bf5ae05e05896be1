"""One case of the crash matrix driven to its end: the run started, the first worker started with its fault, the
fault point reached (SIGKILLed, or frozen with SIGSTOP), the recovery the schedule names, then every approval and
review the run meets answered until it completes, and the invariants checked (crash_invariants.py).

The legs before the verdict and an inline recovery run in this process, as a worker would run them; the workers
are real `manage.py worker` processes (bench/child_processes.py) on the matrix's database, with a two-second lease.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from bench.child_processes import WorkerProcess, wait_until
from bench.crash_invariants import check_invariants
from demo.models import SandboxCommand, SandboxPayment
from runs.models import Effect, Leg, Run

if TYPE_CHECKING:
    from bench.crash_harness import Schedule

__all__ = ["CaseError", "CaseResult", "approve_pending", "resolve_as_reviewer", "run_case", "run_inline"]

RESTING = {Run.Status.SUSPENDED, Run.Status.COMPLETED, Run.Status.NEEDS_REVIEW, Run.Status.FAILED,
           Run.Status.CANCELLED}
PROMPTS = {"reimbursement": "Reimburse {expense}", "coder": "Fix the failing test"}


def case_expense() -> str:
    """An expense of its own for a case to pay, a copy of exp-1042 filed in the sandbox's books: a payment is a
    business operation (pay_expense:<expense>-v1), made once per expense whichever run asks, so cases that all
    paid exp-1042 would replay the first one's payment instead of making their own."""
    from demo.models import SandboxExpense
    from demo.sandbox import EXPENSES

    expense_id = f"exp-9{secrets.randbelow(10**9):09d}"
    SandboxExpense.objects.create(**{**EXPENSES["exp-1042"], "expense_id": expense_id})
    return expense_id
#: How often a case looks at the run and the workers while it waits.
POLL_SECONDS = 0.05


class CaseError(Exception):
    """A case could not be driven to its end (a hang, an unexpected state)."""


@dataclass
class CaseResult:
    """What a case came to: pass, fail (with the invariants it broke) or not reached, and the workers' logs."""

    schedule: Schedule
    run_id: str = ""
    outcome: str = "pass"  # pass | fail | not reached
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0
    saw_review: bool = False
    logs: dict[str, str] = field(default_factory=dict)


def _status(run_id: str) -> str:
    return Run.objects.values_list("status", flat=True).get(run_id=run_id)


def _lease_lapsed(run_id: str) -> bool:
    run = Run.objects.only("status", "lease_expires_at").get(run_id=run_id)
    return run.status != Run.Status.RUNNING or (run.lease_expires_at is not None
                                                and run.lease_expires_at < timezone.now())


class _ProviderMode:
    """The sandbox provider's behaviour for the legs this process runs itself."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.saved: str | None = None

    def __enter__(self) -> None:
        self.saved = os.environ.get("DEUZ_SANDBOX_PAYMENTS")
        if self.mode != "normal":
            os.environ["DEUZ_SANDBOX_PAYMENTS"] = self.mode
        else:
            os.environ.pop("DEUZ_SANDBOX_PAYMENTS", None)

    def __exit__(self, *exc: Any) -> None:
        if self.saved is None:
            os.environ.pop("DEUZ_SANDBOX_PAYMENTS", None)
        else:
            os.environ["DEUZ_SANDBOX_PAYMENTS"] = self.saved


def run_inline(run_id: str, *, provider: str = "normal", timeout: float = 30,
               on_claimed: Callable[[], Any] | None = None) -> None:
    """Run the run's legs in this process (as a worker would, its lease lapsed first) until it rests;
    ``on_claimed`` is called once this process holds the run (so a worker started then cannot take it)."""
    from runs.execution.legs import leg_execute
    from runs.ownership.liveness import liveness_hold
    from runs.services.lifecycle import run_claim

    deadline = time.monotonic() + timeout
    # Held as a worker holds its own: a worker started meanwhile sees this process alive and leaves its run.
    with _ProviderMode(provider), liveness_hold("crashmatrix-inline"):
        while time.monotonic() < deadline:
            if _status(run_id) in RESTING:
                return
            claims = run_claim(worker_id="crashmatrix-inline", limit=1, run_id=run_id)
            if claims:
                if on_claimed is not None:
                    on_claimed()
                    on_claimed = None
                async_to_sync(leg_execute)(claims[0], fault=lambda point: None)
            else:
                time.sleep(POLL_SECONDS)  # queued for another process, or running until its lease lapses
    raise CaseError(f"the run did not come to rest within {timeout:g} s (it is {_status(run_id)})")


def approve_pending(run_id: str) -> int:
    pending = ApprovalRequest.objects.filter(run__run_id=run_id, status=ApprovalRequest.Status.PENDING)
    for request in pending:
        approval_decide(run_id=run_id, approval_id=request.approval_id, approved=True, token=request.token, user=None)
    return len(pending)


def resolve_as_reviewer(run_id: str) -> None:
    """What a reviewer would do: read the provider's own books; committed there, mark it so; absent, retry."""
    from django.contrib.auth import get_user_model

    from approvals.services import reviewers_group_ensure
    from runs.services.resolution import effect_resolve

    user, _ = get_user_model().objects.get_or_create(username="crashmatrix-reviewer")
    user.groups.add(reviewers_group_ensure())
    user = get_user_model().objects.get(pk=user.pk)  # fresh permission cache
    for effect in Effect.objects.filter(run__run_id=run_id, status=Effect.Status.NEEDS_REVIEW):
        found = _provider_record(effect)
        if found is not None:
            effect_resolve(run_id=run_id, operation_id=effect.operation_id, action="commit", receipt=found,
                           reason="The provider's books show it.", user=user)
        else:
            effect_resolve(run_id=run_id, operation_id=effect.operation_id, action="retry",
                           reason="The provider's books do not show it.", user=user)


def _provider_record(effect: Effect) -> dict | None:
    if effect.tool_name == "pay_expense":
        payment = SandboxPayment.objects.filter(operation_id=effect.operation_id).first()
        return payment.receipt() if payment else None
    command = SandboxCommand.objects.filter(operation_id=effect.operation_id).order_by("id").first()
    return {"command": command.command, "exit_code": command.exit_code, "output": command.output} if command else None


def run_case(schedule: Schedule, log_dir: Path) -> CaseResult:
    """Drive the case of ``schedule`` to its end and check the invariants; a hang is a failing case."""
    from runs.services.lifecycle import run_start

    result = CaseResult(schedule)
    started = time.monotonic()
    run_id = result.run_id = f"cm-{secrets.token_hex(4)}"
    workers: dict[str, WorkerProcess] = {}
    provider_env = {"DEUZ_SANDBOX_PAYMENTS": schedule.provider} if schedule.provider != "normal" else {}
    action = "stop" if schedule.recovery == "stale" else "kill"

    def start_first() -> None:  # started early, it boots while this process runs the leg before the verdict
        workers["a"] = WorkerProcess(f"{run_id}-a", log_dir, DEUZ_FAULT=f"{schedule.fault}:{schedule.nth}",
                                     DEUZ_FAULT_ACTION=action, **provider_env)

    try:
        prompt = PROMPTS[schedule.agent].format(expense=case_expense() if schedule.agent == "reimbursement" else "")
        if schedule.turn == 1:
            run_start(agent=schedule.agent, messages=[{"role": "user", "content": prompt}], run_id=run_id)
        else:
            _second_turn_start(schedule, run_id, prompt)
        if schedule.approval == "before":
            run_inline(run_id, on_claimed=start_first)
            if not approve_pending(run_id):
                raise CaseError(f"the run did not wait for an approval (it is {_status(run_id)})")
        else:
            start_first()
        first = workers["a"]
        if schedule.recovery in {"worker", "stale"}:
            # The second worker boots while the first holds the run; it can take over only once that lease lapses.
            wait_until(lambda: Leg.objects.filter(run__run_id=run_id, worker_id=first.name).exists(), timeout=60,
                       what="worker a to claim the run", every=POLL_SECONDS)
            workers["b"] = WorkerProcess(f"{run_id}-b", log_dir, **provider_env)
        if not _fault_reached(schedule, run_id, first):
            result.outcome = "not reached"
            return result
        _recover(schedule, run_id, workers)
        _answer_until_completed(run_id, result)
        result.violations = check_invariants(run_id, schedule, saw_review=result.saw_review)
    except (CaseError, TimeoutError) as exc:
        result.violations = [str(exc)]
    finally:
        for worker in workers.values():
            worker.stop()
            result.logs[worker.name] = worker.output[-4000:]
        result.seconds = time.monotonic() - started
    if result.violations:
        result.outcome = "fail"
    return result


def _second_turn_start(schedule: Schedule, run_id: str, prompt: str) -> None:
    """A thread whose first turn pays its own expense (approved, run here to its end), then its second turn, the
    case's run, queued on the whole history with ``prompt``."""
    from runs.services.threads import thread_message_add, thread_start

    thread = thread_start(agent=schedule.agent, user=None, thread_id=f"{run_id}-thread")
    first_prompt = PROMPTS[schedule.agent].format(expense=case_expense() if schedule.agent == "reimbursement" else "")
    first = thread_message_add(thread_id=thread.thread_id, content=first_prompt, user=None, run_id=f"{run_id}-t1")
    run_inline(first.run_id)
    if not approve_pending(first.run_id):
        raise CaseError(f"the first turn did not wait for an approval (it is {_status(first.run_id)})")
    run_inline(first.run_id)
    if _status(first.run_id) != Run.Status.COMPLETED:
        raise CaseError(f"the first turn ended {_status(first.run_id)}, not completed")
    thread_message_add(thread_id=thread.thread_id, content=prompt, user=None, run_id=run_id)


def _fault_reached(schedule: Schedule, run_id: str, first: WorkerProcess) -> bool:
    """Wait for the first worker to be killed (or frozen) at the fault point: False if the run came to rest first."""

    def reached() -> str | None:
        code = first.process.poll()  # read once: the process may die between two reads
        if code == -signal.SIGKILL or (code is None and first.is_frozen):
            return "hit"
        if code is not None:
            return "died"
        return "rested" if _status(run_id) in RESTING else None

    hit = wait_until(reached, timeout=60, what=f"worker a to reach {schedule.fault}:{schedule.nth}",
                     every=POLL_SECONDS)
    if hit == "died":
        raise CaseError(f"worker a exited with {first.process.returncode} before the fault point")
    return hit == "hit"


def _answer_until_completed(run_id: str, result: CaseResult) -> None:
    """Answer the approvals and reviews the run meets until it completes, noting a review in ``result``."""
    for _ in range(6):
        status = _status(run_id)
        if status == Run.Status.COMPLETED:
            break
        if status == Run.Status.SUSPENDED and approve_pending(run_id):
            run_inline(run_id)
        elif status == Run.Status.NEEDS_REVIEW:
            result.saw_review = True
            resolve_as_reviewer(run_id)
            run_inline(run_id)
        else:
            raise CaseError(f"the run stopped {status}: {Run.objects.get(run_id=run_id).error or 'no reason'}")


def _recover(schedule: Schedule, run_id: str, workers: dict[str, WorkerProcess]) -> None:
    """After the fault: a second worker takes over, or this process does, or a stale worker wakes after it."""
    first = workers["a"]
    if schedule.recovery == "inline":
        wait_until(lambda: _lease_lapsed(run_id), timeout=30, what="the dead worker's lease to lapse",
                   every=POLL_SECONDS)
        run_inline(run_id, provider=schedule.provider)
        return
    second = workers["b"]
    wait_until(lambda: _status(run_id) in RESTING, timeout=60, what="worker b to take the run over",
               every=POLL_SECONDS)
    second.stop()
    if schedule.recovery == "stale":
        first.process.send_signal(signal.SIGCONT)
        wait_until(lambda: "abandon" in first.output or first.process.poll() is not None, timeout=30,
                   what="the stale worker to give the run up", every=POLL_SECONDS)
        first.stop()

