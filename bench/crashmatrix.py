"""`manage.py crashmatrix`: real worker processes SIGKILLed at every fault point, and the seed's invariants checked.

Each case is a schedule: an agent (the reimbursement fixture, or the coder's effectful shell step), a fault point
and which time it is reached, whether the approval is answered before or after the crash, who recovers (a second
worker process taking over; this process once the lease lapsed; or a stale worker frozen at the point with
SIGSTOP, a second one taking over, the first woken with SIGCONT), and how the provider behaves (normal, commits
then times out, reads unavailable). After the run ends, the case checks:

- at most one committed payment (one shell command), none without approval or with other arguments than approved;
- revisions monotonic, one current owner epoch, no write from an epoch after a newer one wrote;
- a gapless journal with one recovery part per restarted step;
- a terminal receipt matching the provider, or needs review where the outcome is truly unknown (the matrix then
  resolves it as a reviewer would, from the provider's books, and checks the run completes).

It prints a progress line per case, then the table; a failing case's schedule and ledger go to a JSON file that
``--replay FILE`` runs again. ``--database sqlite|postgres|both`` runs on scratch databases (migrated here,
dropped after); ``current`` on the configured one as it is (its runs are named ``cm-...``; nothing is deleted).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from runs.presenters.plain_text import table
from deuz_project.database_url import database_url
from demo.models import SandboxCommand, SandboxPayment
from runs.models import Checkpoint, Effect, EffectTransition, JournalEntry, Leg, Run
from runs.runtime.faults import FaultPoint

REPO_ROOT = Path(__file__).resolve().parents[3]
RESTING = {Run.Status.SUSPENDED, Run.Status.COMPLETED, Run.Status.NEEDS_REVIEW, Run.Status.FAILED,
           Run.Status.CANCELLED}
PROMPTS = {"reimbursement": "Reimburse exp-1042", "coder": "Fix the failing test"}
#: Fault points the leg before the verdict reaches, and those the leg after it reaches.
BEFORE_VERDICT = [FaultPoint.AFTER_MODEL_DECISION, FaultPoint.MID_STREAM, FaultPoint.BEFORE_STEP_CHECKPOINT,
                  FaultPoint.AFTER_STEP_CHECKPOINT, FaultPoint.AFTER_SUSPEND]
AFTER_VERDICT = [FaultPoint.BEFORE_EFFECT, FaultPoint.AFTER_EFFECT_COMMIT, FaultPoint.AFTER_EFFECT_RECORD,
                 FaultPoint.BEFORE_STEP_CHECKPOINT, FaultPoint.AFTER_STEP_CHECKPOINT, FaultPoint.MID_STREAM]
LEASE_SECONDS = 2


@dataclass(frozen=True)
class Schedule:
    """One case of the matrix: what crashes where, who answers and who recovers."""

    agent: str = "reimbursement"
    fault: str = FaultPoint.AFTER_EFFECT_COMMIT.value
    nth: int = 1
    approval: str = "before"  # before | after: the verdict is given before or after the crashing leg
    recovery: str = "worker"  # worker | inline | stale
    provider: str = "normal"  # normal | commit-then-timeout | reads-unavailable

    @property
    def name(self) -> str:
        parts = [self.agent, f"{self.fault}:{self.nth}", f"approve-{self.approval}", self.recovery]
        return "/".join(parts + ([self.provider] if self.provider != "normal" else []))

    @property
    def is_truly_unknown(self) -> bool:
        """The crash leaves an attempt without outcome and nobody can read the provider: a person must decide."""
        # Killed before the attempt is recorded, the tool was never called: the recovery attempts it, no question.
        return (self.provider == "reads-unavailable" and self.approval == "before"
                and self.fault == FaultPoint.AFTER_EFFECT_COMMIT)


def quick_matrix() -> list[Schedule]:
    """The compact deterministic matrix CI runs: every fault point, every kind of schedule, both agents."""
    return [
        Schedule(fault="after-model-decision", approval="after", recovery="worker"),
        Schedule(fault="mid-stream", nth=3, approval="after", recovery="inline"),
        Schedule(fault="after-suspend", approval="after", recovery="inline"),
        Schedule(fault="before-effect", recovery="worker"),
        Schedule(fault="after-effect-commit", recovery="stale"),
        Schedule(fault="after-effect-record", recovery="inline", provider="commit-then-timeout"),
        Schedule(fault="before-step-checkpoint", recovery="inline"),
        Schedule(fault="after-step-checkpoint", recovery="inline"),
        Schedule(fault="after-effect-commit", recovery="inline", provider="reads-unavailable"),
        Schedule(agent="coder", fault="after-effect-commit", recovery="inline"),
    ]


def full_matrix() -> list[Schedule]:
    """Every fault point, every time the crashing leg reaches it (up to three), under every schedule."""
    cases: list[Schedule] = []
    for agent in ("reimbursement", "coder"):
        for point in BEFORE_VERDICT:
            for nth in (1, 2, 3) if point == FaultPoint.MID_STREAM else (1, 2):
                for recovery in ("worker", "inline"):
                    cases.append(Schedule(agent, point.value, nth, "after", recovery))
        for point in AFTER_VERDICT:
            for nth in (1, 2, 3) if point == FaultPoint.MID_STREAM else (1, 2):
                for recovery in ("worker", "inline", "stale"):
                    cases.append(Schedule(agent, point.value, nth, "before", recovery))
    for point in AFTER_VERDICT:
        for provider in ("commit-then-timeout", "reads-unavailable"):
            cases.append(Schedule("reimbursement", point.value, 1, "before", "worker", provider))
    return cases


# ------------------------------------------------------------------------------------------- processes


def _database_url() -> str:
    """The URL of the database this process uses, for the worker processes to share."""
    try:
        return database_url()
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def _child_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if key not in {"DEUZ_FAULT", "DEUZ_FAULT_ACTION", "DEUZ_SANDBOX_PAYMENTS"}}
    env.update(DJANGO_SETTINGS_MODULE="deuz_project.settings", PYTHONUNBUFFERED="1",
               DEUZ_LEASE_SECONDS=str(LEASE_SECONDS), DEUZ_DEMO_DELAY_MS="0", **extra)
    return env


class WorkerProcess:
    """`manage.py worker` in a child process against the matrix's database, its output kept in a file."""

    def __init__(self, name: str, log_dir: Path, **env: str) -> None:
        self.name = name
        self.log = log_dir / f"worker-{name}.log"
        with open(self.log, "wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "worker", "--poll", "0.1", "--concurrency", "1", "--worker-id", name],
                cwd=REPO_ROOT, env=_child_env(DATABASE_URL=_database_url(), **env), stdout=output,
                stderr=subprocess.STDOUT,
            )

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    @property
    def is_frozen(self) -> bool:
        """Stopped by SIGSTOP (state T in /proc)."""
        try:
            stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] in {"T", "t"}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def wait_until(predicate: Callable[[], Any], *, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise CaseError(f"timed out after {timeout:g} s waiting for {what}")


class CaseError(Exception):
    """A case could not be driven to its end (a hang, an unexpected state)."""


# ------------------------------------------------------------------------------------------- one case


@dataclass
class CaseResult:
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
    from runs.services.lifecycle import run_claim

    deadline = time.monotonic() + timeout
    with _ProviderMode(provider):
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
                time.sleep(0.05)  # queued for another process, or running until its lease lapses
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
        run_start(agent=schedule.agent, messages=[{"role": "user", "content": PROMPTS[schedule.agent]}], run_id=run_id)
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
                       what="worker a to claim the run")
            workers["b"] = WorkerProcess(f"{run_id}-b", log_dir, **provider_env)
        def reached() -> str | None:
            code = first.process.poll()  # read once: the process may die between two reads
            if code == -signal.SIGKILL or (code is None and first.is_frozen):
                return "hit"
            if code is not None:
                return "died"
            return "rested" if _status(run_id) in RESTING else None

        hit = wait_until(reached, timeout=60, what=f"worker a to reach {schedule.fault}:{schedule.nth}")
        if hit == "died":
            raise CaseError(f"worker a exited with {first.process.returncode} before the fault point")
        if hit == "rested":
            result.outcome = "not reached"
            return result
        _recover(schedule, run_id, workers, log_dir, provider_env)
        for _ in range(6):  # answer the approvals and reviews a run meets until it completes
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
        result.violations = check_invariants(run_id, schedule, saw_review=result.saw_review)
    except CaseError as exc:
        result.violations = [str(exc)]
    finally:
        for worker in workers.values():
            worker.stop()
            result.logs[worker.name] = worker.output[-4000:]
        result.seconds = time.monotonic() - started
    if result.violations:
        result.outcome = "fail"
    return result


def _recover(schedule: Schedule, run_id: str, workers: dict[str, WorkerProcess], log_dir: Path,
             provider_env: dict[str, str]) -> None:
    """After the fault: a second worker takes over, or this process does, or a stale worker wakes after it."""
    first = workers["a"]
    if schedule.recovery == "inline":
        wait_until(lambda: _lease_lapsed(run_id), timeout=30, what="the dead worker's lease to lapse")
        run_inline(run_id, provider=schedule.provider)
        return
    second = workers["b"]
    wait_until(lambda: _status(run_id) in RESTING, timeout=60, what="worker b to take the run over")
    second.stop()
    if schedule.recovery == "stale":
        first.process.send_signal(signal.SIGCONT)
        wait_until(lambda: "abandon" in first.output or first.process.poll() is not None, timeout=30,
                   what="the stale worker to give the run up")
        first.stop()


# ------------------------------------------------------------------------------------------- invariants


def _normalized(request: dict) -> dict:
    return {key: str(value) for key, value in (request or {}).items()}


def check_invariants(run_id: str, schedule: Schedule, *, saw_review: bool) -> list[str]:
    """The seed's invariants for one run; each broken one is a line saying what and where."""
    broken: list[str] = []
    run = Run.objects.get(run_id=run_id)
    effects = list(Effect.objects.filter(run=run).order_by("id"))
    approvals = list(ApprovalRequest.objects.filter(run=run))
    approved = {request.tool_call_id: request for request in approvals
                if request.status in {ApprovalRequest.Status.APPROVED, ApprovalRequest.Status.USED}}
    # At most one committed payment (one shell command), none unapproved or with other arguments.
    if schedule.agent == "reimbursement":
        outside = [(payment.operation_id, payment.request, payment.receipt())
                   for payment in SandboxPayment.objects.filter(operation_id__startswith=f"{run_id}:")]
    else:
        outside = [(command.operation_id, {"command": command.command}, command.result())
                   for command in SandboxCommand.objects.filter(operation_id__startswith=f"{run_id}")]
    if len(outside) != 1:
        broken.append(f"{len(outside)} effects happened at the provider, not exactly one")
    for operation_id, request, _ in outside:
        call_id = operation_id.rsplit(":", 1)[1]
        verdict = approved.get(call_id)
        if verdict is None:
            broken.append(f"{operation_id} happened without an approval")
        elif any(_normalized(verdict.tool_input).get(key) != value for key, value in _normalized(request).items()):
            broken.append(f"{operation_id} happened with other arguments than approved")
    # Revisions monotonic; one current owner epoch; no write from an epoch after a newer one wrote.
    checkpoints = list(Checkpoint.objects.filter(run=run).order_by("id").values_list("session_key", "step_index",
                                                                                     "owner_epoch"))
    root_steps = [step for key, step, _ in checkpoints if key == run_id]
    if root_steps != sorted(root_steps):
        broken.append(f"root revisions went back: steps {root_steps}")
    legs = list(Leg.objects.filter(run=run).order_by("number"))
    leg_epochs = [leg.owner_epoch for leg in legs]
    if leg_epochs != sorted(set(leg_epochs)) or (legs and run.owner_epoch != leg_epochs[-1]):
        broken.append(f"owner epochs not one increasing line: legs {leg_epochs}, run {run.owner_epoch}")
    journal = list(JournalEntry.objects.filter(run=run).order_by("id"))
    transitions = list(EffectTransition.objects.filter(effect__run=run, actor_kind="worker").order_by("id"))
    for what, epochs in (("checkpoints", [epoch for _, _, epoch in checkpoints]),
                         ("journal", [entry.owner_epoch for entry in journal]),
                         ("ledger", [transition.owner_epoch for transition in transitions])):
        if epochs != sorted(epochs):
            broken.append(f"a stale epoch wrote the {what} after a newer one: {epochs}")
        if epochs and max(epochs) > run.owner_epoch:
            broken.append(f"the {what} hold an epoch beyond the run's")
    # A gapless journal with one recovery part per restarted step.
    seqs = [entry.seq for entry in journal if not entry.is_sentinel]
    if seqs != list(range(len(seqs))):
        broken.append(f"the journal has gaps or repeats: {seqs[:40]}")
    parts = [entry.decoded_part for entry in journal if not entry.is_sentinel]
    recoveries = sum(1 for part in parts if part.get("type") == "recovery")
    expected = _restarted_steps(run, legs)
    if recoveries != expected:
        broken.append(f"{recoveries} recovery parts for {expected} restarted steps")
    # A terminal receipt matching the provider, or needs review where the outcome is truly unknown.
    if run.status != Run.Status.COMPLETED:
        broken.append(f"the run ended {run.status}, not completed")
    if schedule.is_truly_unknown and not saw_review:
        broken.append("the outcome was unknowable, yet the run never asked a person")
    if saw_review and schedule.provider == "normal":
        broken.append("the run asked a person although the provider could be read")
    tool = "pay_expense" if schedule.agent == "reimbursement" else "run_shell"
    mine = [effect for effect in effects if effect.tool_name == tool]
    if len(mine) != 1:
        broken.append(f"{len(mine)} ledger entries for {tool}, not one")
    elif outside:
        effect, (_, _, receipt) = mine[0], outside[0]
        if effect.status not in {Effect.Status.VERIFIED, Effect.Status.COMMITTED}:
            broken.append(f"the ledger says {effect.status}, not committed or verified")
        key = "transaction_id" if tool == "pay_expense" else "output"
        if not isinstance(effect.receipt, dict) or effect.receipt.get(key) != receipt.get(key):
            broken.append("the ledger's receipt does not match the provider's")
        if tool == "pay_expense" and receipt.get("transaction_id", "-") not in _final_text(run_id):
            broken.append("the final answer does not name the provider's transaction")
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
        "provider": [payment.receipt() for payment in SandboxPayment.objects.filter(operation_id__startswith=run_id)]
        + [command.result() for command in SandboxCommand.objects.filter(operation_id__startswith=run_id)],
        "worker_logs": result.logs,
    }


# ------------------------------------------------------------------------------------------- the command


def _schedules_from(path: str) -> list[Schedule]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CommandError(f"Cannot read {path}: {exc.strerror}.") from None
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path} is not JSON: {exc.msg}.") from None
    items = data.get("cases", [data]) if isinstance(data, dict) else data
    try:
        return [Schedule(**item["schedule"]) for item in items]
    except (TypeError, KeyError) as exc:
        raise CommandError(f"{path} holds no crash matrix schedule ({exc}).") from None


class Command(BaseCommand):
    help = "Kill real worker processes at every fault point under several schedules and check the invariants."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--quick", action="store_true", help="The compact matrix CI runs (a dozen cases).")
        parser.add_argument("--database", choices=["sqlite", "postgres", "both", "current"], default="sqlite",
                            help="Scratch SQLite and/or PostgreSQL databases, or the configured one (current).")
        parser.add_argument("--postgres-url", default=os.environ.get("DEUZ_CRASHMATRIX_POSTGRES_URL"),
                            help="A PostgreSQL server to create the scratch database on (default: "
                                 "DEUZ_CRASHMATRIX_POSTGRES_URL, else DATABASE_URL when it is PostgreSQL).")
        parser.add_argument("--replay", metavar="FILE", help="Run the schedule of a failed case written earlier.")
        parser.add_argument("--failures", metavar="DIR", default="crashmatrix-failures",
                            help="Where failing cases' schedules and ledgers are written (default "
                                 "./crashmatrix-failures).")
        parser.add_argument("--only", metavar="TEXT", help="Only the cases whose name contains TEXT.")

    def handle(self, *args: Any, database: str, **options: Any) -> None:
        if database == "current":
            self.run_matrix(**options)
            return
        failed = []
        for vendor in (["sqlite", "postgres"] if database == "both" else [database]):
            self.stdout.write(f"== crash matrix on {vendor} ==")
            if self.run_on_scratch(vendor, **options) != 0:
                failed.append(vendor)
        if failed:
            raise CommandError(f"The crash matrix failed on {', '.join(failed)}.")

    # ---------------------------------------------------------------- scratch databases

    def run_on_scratch(self, vendor: str, *, postgres_url: str | None, **options: Any) -> int:
        if vendor == "sqlite":
            with tempfile.TemporaryDirectory(prefix="deuz-crashmatrix-") as scratch:
                return self._child(f"sqlite:///{scratch}/crashmatrix.sqlite3", **options)
        server = postgres_url or (os.environ.get("DATABASE_URL", "") if os.environ.get(
            "DATABASE_URL", "").startswith(("postgres://", "postgresql://")) else None)
        if not server:
            raise CommandError("--database postgres needs --postgres-url (or DEUZ_CRASHMATRIX_POSTGRES_URL, or a "
                               "PostgreSQL DATABASE_URL) naming a server where a scratch database can be created.")
        import dj_database_url
        import psycopg

        config = dj_database_url.parse(server)
        name = f"deuz_crashmatrix_{os.getpid()}"
        admin = None
        for maintenance in dict.fromkeys(["postgres", config["NAME"] or "postgres"]):  # the server's own first
            try:
                admin = psycopg.connect(host=config["HOST"] or None, port=config["PORT"] or None,
                                        user=config["USER"] or None, password=config["PASSWORD"] or None,
                                        dbname=maintenance, autocommit=True)
                break
            except psycopg.OperationalError as exc:
                error = exc
        if admin is None:
            raise CommandError(f"Cannot connect to the PostgreSQL server to create a scratch database: {error}")
        try:
            admin.execute(f'CREATE DATABASE "{name}"')
            base = server.rsplit("/", 1)[0]
            return self._child(f"{base}/{name}", **options)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.close()

    def _child(self, url: str, *, quick: bool, replay: str | None, failures: str, only: str | None,
               **options: Any) -> int:
        env = _child_env(DATABASE_URL=url)
        migrate = subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"], cwd=REPO_ROOT,
                                 env=env, capture_output=True, text=True)
        if migrate.returncode != 0:
            raise CommandError(f"Migrating the scratch database failed: {migrate.stderr[-2000:]}")
        command = [sys.executable, "manage.py", "crashmatrix", "--database", "current", "--failures",
                   str(Path(failures).resolve())]
        command += ["--quick"] if quick else []
        command += ["--replay", str(Path(replay).resolve())] if replay else []
        command += ["--only", only] if only else []
        child = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True)
        assert child.stdout is not None
        for line in child.stdout:
            self.stdout.write(line, ending="")
            self.stdout.flush()
        return child.wait()

    # ---------------------------------------------------------------- the matrix itself

    def run_matrix(self, *, quick: bool, replay: str | None, failures: str, only: str | None,
                   **options: Any) -> None:
        _database_url()  # the worker processes must be able to share this database
        schedules = _schedules_from(replay) if replay else (quick_matrix() if quick else full_matrix())
        if only:
            schedules = [schedule for schedule in schedules if only in schedule.name]
        if not schedules:
            raise CommandError("No case matches.")
        self.stdout.write(f"Crash matrix on {connection.vendor}: {len(schedules)} cases, worker lease "
                          f"{LEASE_SECONDS} s.")
        results: list[CaseResult] = []
        with tempfile.TemporaryDirectory(prefix="deuz-crashmatrix-logs-") as logs:
            for index, schedule in enumerate(schedules, start=1):
                self.stdout.write(f"[{index:>3}/{len(schedules)}] {schedule.name} ... ", ending="")
                self.stdout.flush()
                result = run_case(schedule, Path(logs))
                results.append(result)
                where = ""
                if result.outcome == "fail":
                    where = " -> " + self._write_failure(result, failures)
                self.stdout.write(f"{result.outcome} ({result.seconds:.1f} s){where}")
                for violation in result.violations:
                    self.stdout.write(f"      {violation}")
        self.stdout.write("")
        self.stdout.write(table(["CASE", "RESULT", "LEGS", "EPOCH", "EFFECT", "OUTSIDE", "REVIEW", "SECONDS"],
                                [self._row(result) for result in results]))
        failed = [result for result in results if result.outcome == "fail"]
        passed = sum(1 for result in results if result.outcome == "pass")
        self.stdout.write(f"{passed} passed, {len(failed)} failed, "
                          f"{len(results) - passed - len(failed)} not reached, on {connection.vendor}.")
        if failed:
            raise CommandError(f"{len(failed)} of {len(results)} cases broke an invariant; their schedules and "
                               f"ledgers are in {failures}/ (replay one with --replay FILE).")

    def _row(self, result: CaseResult) -> tuple:
        run = Run.objects.filter(run_id=result.run_id).first()
        if run is None or result.outcome == "not reached":
            return (result.schedule.name, result.outcome, "-", "-", "-", "-", "-", f"{result.seconds:.1f}")
        effect = run.effects.exclude(tool_name="lookup_expense").order_by("id").last()
        outside = (SandboxPayment.objects.filter(operation_id__startswith=f"{run.run_id}:").count()
                   + SandboxCommand.objects.filter(operation_id__startswith=run.run_id).count())
        return (result.schedule.name, result.outcome, run.legs.count(), run.owner_epoch,
                effect.status if effect else "-", outside, "yes" if result.saw_review else "no",
                f"{result.seconds:.1f}")

    def _write_failure(self, result: CaseResult, failures: str) -> str:
        directory = Path(failures)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{connection.vendor}-{result.schedule.name.replace('/', '_').replace(':', '-')}.json"
        path.write_text(json.dumps(case_report(result, result.run_id), indent=2, default=str) + "\n",
                        encoding="utf-8")
        return str(path)
