"""`manage.py runs`: the operators' view of runs: list, show, follow, resume, cancel, export.

`follow` reads progress from the run's journal (``JournalProgress``); any object with the same ``poll()``
(the resumable stream journal, later) can replace it without touching the printing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from approvals.models import ApprovalRequest
from runs.cli_format import message_text, one_line, table, when
from runs.errors import RunNotFound, RunNotResumable, SealedDataError
from runs.models import Checkpoint, Run
from runs.selectors import run_get, run_input_messages, run_leg_list, run_list, run_people_state
from runs.services import run_cancel, run_requeue
from runs.stores.db import DatabaseSessionStore
from runs.stores.journal import DatabaseStreamStateStore

RECEIPT_VERSION = 1

#: How `follow` ends: the run is done and fine, or it needs a person (exit 1).
FOLLOW_DONE = {Run.Status.COMPLETED, Run.Status.CANCELLED}
FOLLOW_FAILED = {Run.Status.FAILED, Run.Status.NEEDS_REVIEW}

#: `follow --timeout` ran out (the convention of timeout(1)).
TIMEOUT_EXIT_CODE = 124


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value


class Command(BaseCommand):
    help = "Operators' view of runs: list, show, follow, resume, cancel, export (the recovery receipt)."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

        listing = actions.add_parser("list", help="Runs, newest first.")
        listing.add_argument("--status", choices=Run.Status.values, help="Only runs in this status.")
        listing.add_argument("--agent", help="Only runs of this agent.")
        listing.add_argument("--limit", type=_positive_int, default=20, help="At most this many (default 20).")

        show = actions.add_parser("show", help="One run: its state and why, legs, effects, last message.")
        show.add_argument("run_id")

        follow = actions.add_parser("follow", help="Print a run's progress until it completes, fails or waits.")
        follow.add_argument("run_id")
        follow.add_argument("--timeout", type=_positive_float, help="Give up after this many seconds (exit 124).")
        follow.add_argument("--interval", type=_positive_float, default=0.5, help="Seconds between polls (0.5).")

        resume = actions.add_parser("resume", help="Queue another leg for a failed run or one that needs review.")
        resume.add_argument("run_id")

        cancel = actions.add_parser("cancel", help="Cancel a run: no new model calls, no new effects.")
        cancel.add_argument("run_id")

        export = actions.add_parser("export", help="The run's recovery receipt as JSON.")
        export.add_argument("run_id")
        export.add_argument("-o", "--output", metavar="FILE", help="Write the receipt to FILE instead of stdout.")

    def handle(self, *args, action: str, **options: Any) -> None:
        try:
            getattr(self, f"handle_{action}")(**options)
        except (RunNotFound, RunNotResumable, SealedDataError) as exc:
            raise CommandError(str(exc)) from None

    # ------------------------------------------------------------------ list

    def handle_list(self, *, status: str | None, agent: str | None, limit: int, **options: Any) -> None:
        runs = list(run_list(status=status, agent=agent)[:limit])
        rows = [
            (run.run_id, run.agent, run.status, run.step_index, _total_tokens(run.usage), run.updated_at)
            for run in runs
        ]
        self.stdout.write(table(["RUN", "AGENT", "STATUS", "STEP", "TOKENS", "UPDATED"], rows, empty="No runs."))

    # ------------------------------------------------------------------ show

    def handle_show(self, *, run_id: str, **options: Any) -> None:
        run = run_get(run_id=run_id)
        legs = list(run_leg_list(run=run))
        effects = list(run.effects.order_by("id"))
        pending = list(ApprovalRequest.objects.filter(run=run, status=ApprovalRequest.Status.PENDING).order_by("id"))
        out = self.stdout
        out.write(f"Run {run.run_id} ({run.agent or 'no agent'})")
        out.write(f"  State:    {run_people_state(run, legs=legs, effects=effects).label}  [{run.status}]")
        for line in _why(run, pending):
            out.write(f"  Why:      {line}")
        usage = run.usage or {}
        out.write(
            f"  Step:     {run.step_index}    Tokens: {_total_tokens(usage)}"
            f" (in {usage.get('input_tokens', 0)}, out {usage.get('output_tokens', 0)})"
        )
        lease = when(run.lease_expires_at)
        out.write(f"  Owner:    epoch {run.owner_epoch}, worker {run.worker_id or '-'}, lease until {lease}")
        out.write(f"  Created:  {when(run.created_at)}    Updated: {when(run.updated_at)}")
        if pending:
            out.write("")
            out.write(f"Pending approvals ({len(pending)})")
            for request in pending:
                self._write_approval(request)
        out.write("")
        out.write("Legs")
        out.write(_indent(table(
            ["#", "KIND", "EPOCH", "WORKER", "STARTED", "ENDED", "FINISH", "ERROR"],
            [(leg.number, leg.kind, leg.owner_epoch, leg.worker_id, leg.started_at, leg.ended_at,
              leg.finish_reason or "-", one_line(leg.error, limit=50) if leg.error else "-") for leg in legs],
        )))
        out.write("")
        out.write("Effects")
        out.write(_indent(table(
            ["OPERATION", "TOOL", "STATUS", "ATTEMPTS", "EPOCH", "RECEIPT"],
            [(effect.operation_id, effect.tool_name, effect.status, effect.attempts, effect.owner_epoch,
              one_line(effect.receipt, limit=60) if effect.receipt else (effect.error or "-")) for effect in effects],
        )))
        last = _last_text_message(run)
        out.write("")
        if last is None:
            out.write("Last message: (none)")
        else:
            out.write(f"Last message ({last['role']})")
            out.write(_indent(message_text(last)))

    def _write_approval(self, request: ApprovalRequest) -> None:
        self.stdout.write(f"  {request.tool_name}  approval {request.approval_id}  expires {when(request.expires_at)}")
        self.stdout.write(f"    input: {json.dumps(request.tool_input, ensure_ascii=False, sort_keys=True)}")
        if request.agent_path:
            self.stdout.write(f"    agent path: {' > '.join(request.agent_path)}")

    # ---------------------------------------------------------------- follow

    def handle_follow(self, *, run_id: str, timeout: float | None, interval: float, **options: Any) -> None:
        run = run_get(run_id=run_id)
        progress = JournalProgress(run)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            # Status first, then progress: whatever led to a final status is printed before we stop.
            run = run_get(run_id=run_id)
            for event in progress.poll():
                self._write_event(event)
            if run.status in FOLLOW_DONE | FOLLOW_FAILED | {Run.Status.SUSPENDED}:
                self._end_line()
            if run.status in FOLLOW_DONE:
                self.stdout.write(f"Run {run.run_id} {run.get_status_display().lower()}.")
                return
            if run.status in FOLLOW_FAILED:
                raise CommandError(
                    f"Run {run.run_id} {run.get_status_display().lower()}: {run.error or 'no reason was recorded.'}"
                )
            if run.status == Run.Status.SUSPENDED:
                pending = ApprovalRequest.objects.filter(run=run, status=ApprovalRequest.Status.PENDING).order_by("id")
                self.stdout.write(f"Run {run.run_id} is waiting for review ({len(pending)} pending):")
                for request in pending:
                    self._write_approval(request)
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise CommandError(
                    f"Run {run.run_id} is still {run.status} after {timeout:g} s; stopped following.",
                    returncode=TIMEOUT_EXIT_CODE,
                )
            time.sleep(interval)

    def _end_line(self) -> None:
        if getattr(self, "_mid_line", False):
            self.stdout.write("")
            self._mid_line = False

    def _write_event(self, event: ProgressEvent) -> None:
        """Text deltas stream inline as they arrive; every other event starts its own line."""
        if event.kind == "delta":
            self.stdout.write(event.text, ending="")
            self.stdout.flush()
            self._mid_line = True
            return
        self._end_line()
        where = f" [{' > '.join(event.agent_path)}]" if event.agent_path else ""
        if event.kind == "step":
            self.stdout.write(f"step {event.step_index}:")
        elif event.kind == "tool_call":
            self.stdout.write(f"  -> {event.text}")
        elif event.kind == "tool_result":
            self.stdout.write(f"  <- {event.text}")
        elif event.kind == "approval":
            self.stdout.write(f"approval needed{where}: {event.text}")
        elif event.kind == "recovery":
            self.stdout.write(f"(recovery) {event.text}")
        elif event.kind == "error":
            self.stdout.write(f"error: {event.text}")

    # ---------------------------------------------------- resume, cancel

    def handle_resume(self, *, run_id: str, **options: Any) -> None:
        run = run_requeue(run_id=run_id)
        self.stdout.write(f"Run {run.run_id} is queued for another leg; a worker will pick it up.")

    def handle_cancel(self, *, run_id: str, **options: Any) -> None:
        run = run_cancel(run_id=run_id)
        if run.status == Run.Status.CANCELLED:
            self.stdout.write(f"Run {run.run_id} cancelled.")
        else:
            self.stdout.write(f"Run {run.run_id}: cancellation requested; its running leg stops at its next step.")

    # ---------------------------------------------------------------- export

    def handle_export(self, *, run_id: str, output: str | None, **options: Any) -> None:
        receipt = run_receipt(run_get(run_id=run_id))
        text = json.dumps(receipt, ensure_ascii=False, indent=2)
        if output is None:
            self.stdout.write(text)
            return
        try:
            Path(output).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"Cannot write {output}: {exc.strerror}.") from None
        self.stdout.write(f"Wrote the recovery receipt of run {run_id} to {output}.")


# ------------------------------------------------------------------- follow source


@dataclass(frozen=True)
class ProgressEvent:
    """One line of `runs follow`: a closed step, an assistant's text or tool call, a new approval request."""

    kind: str  # step | delta | tool_call | tool_result | approval | recovery | error
    step_index: int | None = None
    status: str = ""
    text: str = ""
    agent_path: tuple[str, ...] = ()


@dataclass
class JournalProgress:
    """A run's progress read from its journal (the resumable wire), each part reported once, text live."""

    run: Run
    cursor: int = -1
    store: DatabaseStreamStateStore = field(default_factory=DatabaseStreamStateStore)

    def poll(self) -> list[ProgressEvent]:
        events: list[ProgressEvent] = []
        while True:
            page = self.store.read_sync(self.run.run_id, self.cursor, 500)
            for seq, part in page.parts:
                self.cursor = seq
                event = _progress_event(part)
                if event is not None:
                    events.append(event)
            if not page.has_more:
                return events


def _progress_event(part: dict[str, Any]) -> ProgressEvent | None:
    kind = part.get("type")
    if kind == "step-start":
        return ProgressEvent("step", step_index=part.get("step_index"), status="started")
    if kind == "text-delta":
        return ProgressEvent("delta", text=part.get("text", ""))
    if kind == "tool-call":
        return ProgressEvent("tool_call", text=f"{part.get('tool_name')} {one_line(part.get('input', {}))}")
    if kind == "tool-result":
        marker = "error" if part.get("is_error") else "result"
        return ProgressEvent("tool_result", text=f"{part.get('tool_name')} {marker}: {one_line(part.get('output'))}")
    if kind == "tool-approval-request":
        approval = part.get("approval") or {}
        return ProgressEvent("approval", text=f"{approval.get('tool_name')} {one_line(approval.get('input', {}))}",
                             agent_path=tuple(approval.get("agent_path") or ()))
    if kind == "recovery":
        return ProgressEvent("recovery", text=part.get("message", ""), step_index=part.get("restarted_step_index"))
    if kind == "error":
        error = part.get("error") or {}
        return ProgressEvent("error", text=f"{error.get('name')}: {error.get('message')}")
    return None


# ------------------------------------------------------------------ the receipt


def run_receipt(run: Run) -> dict[str, Any]:
    """The recovery receipt: what the run did and why an effect happened once, with no bearer tokens."""
    approvals = ApprovalRequest.objects.filter(run=run).select_related("revision", "decided_by").order_by("id")
    return {
        "receipt_version": RECEIPT_VERSION,
        "generated_at": _iso(timezone.now()),
        "run": {
            "run_id": run.run_id,
            "agent": run.agent,
            "status": run.status,
            "status_label": run.get_status_display(),
            "step_index": run.step_index,
            "usage": run.usage,
            "finish_reason": run.finish_reason,
            "error": run.error,
            "owner_epoch": run.owner_epoch,
            "cancel_requested": run.cancel_requested,
            "created_by": run.created_by.get_username() if run.created_by else None,
            "created_at": _iso(run.created_at),
            "updated_at": _iso(run.updated_at),
        },
        "legs": [
            {
                "number": leg.number,
                "kind": leg.kind,
                "owner_epoch": leg.owner_epoch,
                "worker_id": leg.worker_id,
                "started_at": _iso(leg.started_at),
                "ended_at": _iso(leg.ended_at),
                "finish_reason": leg.finish_reason,
                "usage": leg.usage,
                "error": leg.error,
            }
            for leg in run_leg_list(run=run)
        ],
        "checkpoints": [
            {
                "step_id": row.step_id,
                "status": row.status,
                "owner_epoch": row.owner_epoch,
                "recorded_at": _iso(row.recorded_at),
                "message_count": row.message_count,
                "agent_path": list(row.agent_path or []),
            }
            for row in Checkpoint.objects.filter(run=run).order_by("id")
        ],
        "approvals": [
            {
                "approval_id": request.approval_id,
                "tool_call_id": request.tool_call_id,
                "tool_name": request.tool_name,
                "input": request.tool_input,
                "agent_path": list(request.agent_path or []),
                "revision": request.revision.step_id,
                "status": request.status,
                "issued_at": _iso(request.issued_at),
                "expires_at": _iso(request.expires_at),
                "decided_by": request.decided_by.get_username() if request.decided_by else None,
                "decided_at": _iso(request.decided_at),
                "reason": request.reason,
                # The token is a bearer credential: its digest identifies it without granting anything.
                "token_sha256": hashlib.sha256(request.token.encode()).hexdigest() if request.token else None,
            }
            for request in approvals
        ],
        "effects": [
            {
                "operation_id": effect.operation_id,
                "tool_call_id": effect.tool_call_id,
                "tool_name": effect.tool_name,
                "request_fingerprint": effect.fingerprint,
                "request": effect.request,
                "status": effect.status,
                "attempts": effect.attempts,
                "owner_epoch": effect.owner_epoch,
                "receipt": effect.receipt,
                "error": effect.error,
                "created_at": _iso(effect.created_at),
                "updated_at": _iso(effect.updated_at),
            }
            for effect in run.effects.order_by("id")
        ],
        "final_text": _final_text(run),
    }


# ------------------------------------------------------------------------ helpers


def _why(run: Run, pending: list[ApprovalRequest]) -> list[str]:
    if run.status == Run.Status.SUSPENDED:
        tools = ", ".join(request.tool_name for request in pending) or "no request is pending"
        return [f"waiting for a reviewer's verdict on {tools}"]
    if run.error:
        return [run.error]
    if run.cancel_requested and run.status != Run.Status.CANCELLED:
        return ["a cancellation was requested"]
    if run.finish_reason and run.status in {Run.Status.COMPLETED, Run.Status.CANCELLED}:
        return [f"finished: {run.finish_reason}"]
    return []


def _total_tokens(usage: dict[str, Any] | None) -> int:
    return int((usage or {}).get("total_tokens", 0))


def _latest_messages(run: Run) -> list[dict[str, Any]]:
    """The run's latest full history, or the messages it started from before any checkpoint."""
    checkpoint = DatabaseSessionStore().load_sync(run.run_id)
    return checkpoint["messages"] if checkpoint is not None else run_input_messages(run)


def _last_text_message(run: Run) -> dict[str, Any] | None:
    for message in reversed(_latest_messages(run)):
        if message_text(message):
            return message
    return None


def _final_text(run: Run) -> str | None:
    for message in reversed(_latest_messages(run)):
        if message.get("role") == "assistant" and message_text(message):
            return message_text(message)
    return None


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _indent(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line for line in text.splitlines()) or prefix
