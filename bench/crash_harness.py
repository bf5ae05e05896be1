"""The crash matrix (`manage.py crashmatrix`): real worker processes SIGKILLed at every fault point, and the seed's
invariants checked.

Each case is a schedule: an agent (the reimbursement fixture, or the coder's effectful shell step), a fault point
and which time it is reached, whether the approval is answered before or after the crash, who recovers (a second
worker process taking over; this process once the lease lapsed; or a stale worker frozen at the point with
SIGSTOP, a second one taking over, the first woken with SIGCONT), and how the provider behaves (normal, commits
then times out, reads unavailable), and whether the run is a thread's first turn or its second (after a first turn
that paid). After the run ends, the case checks:

- at most one committed payment (one shell command), none without approval or with other arguments than approved;
- revisions monotonic, one current owner epoch, no write from an epoch after a newer one wrote;
- a gapless journal with one recovery part per restarted step;
- a terminal receipt matching the provider, or needs review where the outcome is truly unknown (the matrix then
  resolves it as a reviewer would, from the provider's books, and checks the run completes);
- in a second turn: it started from the first turn's whole history (its payment's result included), and the first
  turn's payment was not made again.

It prints a progress line per case, then the table; a failing case's schedule and ledger go to a JSON file that
``--replay FILE`` runs again. ``--database sqlite|postgres|both`` runs on scratch databases (migrated here,
dropped after); ``current`` on the configured one as it is (its runs are named ``cm-...``; nothing is deleted).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.management.base import OutputWrapper
from django.db import connection

from bench.child_processes import LEASE_SECONDS, REPO_ROOT, child_env
from bench.crash_case import CaseResult, run_case
from bench.crash_invariants import case_report, run_payments
from demo.models import SandboxCommand
from deuz_project.database_url import database_url
from runs.models import Run
from runs.presenters.plain_text import table
from runs.runtime.faults import FaultPoint

__all__ = ["MatrixError", "Schedule", "crashmatrix_run", "full_matrix", "quick_matrix", "schedules_from"]

#: Fault points the leg before the verdict reaches, and those the leg after it reaches.
BEFORE_VERDICT = [FaultPoint.AFTER_MODEL_DECISION, FaultPoint.MID_STREAM, FaultPoint.BEFORE_STEP_CHECKPOINT,
                  FaultPoint.AFTER_STEP_CHECKPOINT, FaultPoint.AFTER_SUSPEND]
AFTER_VERDICT = [FaultPoint.BEFORE_EFFECT, FaultPoint.AFTER_EFFECT_COMMIT, FaultPoint.AFTER_EFFECT_RECORD,
                 FaultPoint.BEFORE_STEP_CHECKPOINT, FaultPoint.AFTER_STEP_CHECKPOINT, FaultPoint.MID_STREAM]


@dataclass(frozen=True)
class Schedule:
    """One case of the matrix: what crashes where, who answers and who recovers."""

    agent: str = "reimbursement"
    fault: str = FaultPoint.AFTER_EFFECT_COMMIT.value
    nth: int = 1
    approval: str = "before"  # before | after: the verdict is given before or after the crashing leg
    recovery: str = "worker"  # worker | inline | stale
    provider: str = "normal"  # normal | commit-then-timeout | reads-unavailable
    turn: int = 1  # 2: the run is a thread's second turn, after a first turn that paid another expense

    @property
    def name(self) -> str:
        parts = [self.agent, f"{self.fault}:{self.nth}", f"approve-{self.approval}", self.recovery]
        parts += [self.provider] if self.provider != "normal" else []
        return "/".join(parts + ([f"thread-turn-{self.turn}"] if self.turn != 1 else []))

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
        Schedule(fault="after-effect-commit", recovery="worker", turn=2),
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


class MatrixError(Exception):
    """The matrix could not run, or a case broke an invariant; the command says it as a CommandError."""


def schedules_from(path: str) -> list[Schedule]:
    """The schedules of a failing case's report (or of a file of ``{"cases": [...]}``), for ``--replay``."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise MatrixError(f"Cannot read {path}: {exc.strerror}.") from None
    except json.JSONDecodeError as exc:
        raise MatrixError(f"{path} is not JSON: {exc.msg}.") from None
    items = data.get("cases", [data]) if isinstance(data, dict) else data
    try:
        return [Schedule(**item["schedule"]) for item in items]
    except (TypeError, KeyError) as exc:
        raise MatrixError(f"{path} holds no crash matrix schedule ({exc}).") from None


def crashmatrix_run(*, database: str, stdout: OutputWrapper, postgres_url: str | None, quick: bool,
                    replay: str | None, failures: str, only: str | None) -> None:
    """Run the matrix on ``database`` (sqlite, postgres, both: scratch databases; current: the configured one),
    writing its progress and table to ``stdout``; raise MatrixError when it cannot run or a case failed."""
    options = {"quick": quick, "replay": replay, "failures": failures, "only": only}
    if database == "current":
        _matrix_run(stdout=stdout, **options)
        return
    failed = []
    for vendor in (["sqlite", "postgres"] if database == "both" else [database]):
        stdout.write(f"== crash matrix on {vendor} ==")
        if _on_scratch(vendor, stdout=stdout, postgres_url=postgres_url, **options) != 0:
            failed.append(vendor)
    if failed:
        raise MatrixError(f"The crash matrix failed on {', '.join(failed)}.")


# ------------------------------------------------------------------------------------------- scratch databases


def _on_scratch(vendor: str, *, postgres_url: str | None, **options: Any) -> int:
    """Run the matrix in a child process on a new database of ``vendor``, dropped after; the child's exit code."""
    if vendor == "sqlite":
        with tempfile.TemporaryDirectory(prefix="deuz-crashmatrix-") as scratch:
            return _child(f"sqlite:///{scratch}/crashmatrix.sqlite3", **options)
    server = postgres_url or (os.environ.get("DATABASE_URL", "") if os.environ.get(
        "DATABASE_URL", "").startswith(("postgres://", "postgresql://")) else None)
    if not server:
        raise MatrixError("--database postgres needs --postgres-url (or DEUZ_CRASHMATRIX_POSTGRES_URL, or a "
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
        raise MatrixError(f"Cannot connect to the PostgreSQL server to create a scratch database: {error}")
    try:
        admin.execute(f'CREATE DATABASE "{name}"')
        base = server.rsplit("/", 1)[0]
        return _child(f"{base}/{name}", **options)
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def _child(url: str, *, stdout: OutputWrapper, quick: bool, replay: str | None, failures: str,
           only: str | None) -> int:
    """Migrate the database at ``url``, then run `manage.py crashmatrix --database current` on it, its output
    copied to ``stdout`` line by line."""
    env = child_env(DATABASE_URL=url)
    migrate = subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"], cwd=REPO_ROOT,
                             env=env, capture_output=True, text=True)
    if migrate.returncode != 0:
        raise MatrixError(f"Migrating the scratch database failed: {migrate.stderr[-2000:]}")
    command = [sys.executable, "manage.py", "crashmatrix", "--database", "current", "--failures",
               str(Path(failures).resolve())]
    command += ["--quick"] if quick else []
    command += ["--replay", str(Path(replay).resolve())] if replay else []
    command += ["--only", only] if only else []
    child = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    assert child.stdout is not None
    for line in child.stdout:
        stdout.write(line, ending="")
        stdout.flush()
    return child.wait()


# ------------------------------------------------------------------------------------------- the matrix itself


def _matrix_run(*, stdout: OutputWrapper, quick: bool, replay: str | None, failures: str, only: str | None) -> None:
    """Every case of the matrix on the configured database, a progress line each, then the table."""
    try:
        database_url()  # the worker processes must be able to share this database
    except ValueError as exc:
        raise MatrixError(str(exc)) from None
    schedules = schedules_from(replay) if replay else (quick_matrix() if quick else full_matrix())
    if only:
        schedules = [schedule for schedule in schedules if only in schedule.name]
    if not schedules:
        raise MatrixError("No case matches.")
    stdout.write(f"Crash matrix on {connection.vendor}: {len(schedules)} cases, worker lease {LEASE_SECONDS} s.")
    results: list[CaseResult] = []
    with tempfile.TemporaryDirectory(prefix="deuz-crashmatrix-logs-") as logs:
        for index, schedule in enumerate(schedules, start=1):
            stdout.write(f"[{index:>3}/{len(schedules)}] {schedule.name} ... ", ending="")
            stdout.flush()
            result = run_case(schedule, Path(logs))
            results.append(result)
            where = ""
            if result.outcome == "fail":
                where = " -> " + _write_failure(result, failures)
            stdout.write(f"{result.outcome} ({result.seconds:.1f} s){where}")
            for violation in result.violations:
                stdout.write(f"      {violation}")
    stdout.write("")
    stdout.write(table(["CASE", "RESULT", "LEGS", "EPOCH", "EFFECT", "OUTSIDE", "REVIEW", "SECONDS"],
                       [_row(result) for result in results]))
    failed = [result for result in results if result.outcome == "fail"]
    passed = sum(1 for result in results if result.outcome == "pass")
    stdout.write(f"{passed} passed, {len(failed)} failed, "
                 f"{len(results) - passed - len(failed)} not reached, on {connection.vendor}.")
    if failed:
        raise MatrixError(f"{len(failed)} of {len(results)} cases broke an invariant; their schedules and "
                          f"ledgers are in {failures}/ (replay one with --replay FILE).")


def _row(result: CaseResult) -> tuple:
    """A case's line of the table."""
    run = Run.objects.filter(run_id=result.run_id).first()
    if run is None or result.outcome == "not reached":
        return (result.schedule.name, result.outcome, "-", "-", "-", "-", "-", f"{result.seconds:.1f}")
    effect = run.effects.exclude(tool_name="lookup_expense").order_by("id").last()
    outside = (len(run_payments(run.run_id))
               + SandboxCommand.objects.filter(operation_id__startswith=run.run_id).count())
    return (result.schedule.name, result.outcome, run.legs.count(), run.owner_epoch,
            effect.status if effect else "-", outside, "yes" if result.saw_review else "no",
            f"{result.seconds:.1f}")


def _write_failure(result: CaseResult, failures: str) -> str:
    """Write a failing case's report to the ``failures`` folder; its path."""
    directory = Path(failures)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{connection.vendor}-{result.schedule.name.replace('/', '_').replace(':', '-')}.json"
    path.write_text(json.dumps(case_report(result, result.run_id), indent=2, default=str) + "\n", encoding="utf-8")
    return str(path)
