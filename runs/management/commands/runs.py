"""`manage.py runs`: the operators' view of runs: list, show, follow, resume, cancel, export, fork (a new run from a
checkpoint); and the effect ledger's controls: resolve (an effect that needs review) and stop-effects (the stop switch).

`follow` reads progress from the run's journal (runs.presenters.progress); `export` writes the receipt of
runs.presenters.receipt; `show` prints the people-facing state of runs.presenters.state.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError

from approvals.models import ApprovalRequest
from approvals.selectors import approval_pending_list
from runs.presenters.plain_text import message_text, one_line, table, when
from runs.services.resolution import RESOLVE_ACTIONS, effect_resolve
from runs.errors import RunAlreadyExists, RunNotFound, RunNotResumable, SealedDataError, UnknownAgent
from runs.models import Run
from runs.presenters.leg_ends import interruption_text, run_leg_ends
from runs.presenters.progress import JournalProgress, ProgressEvent
from runs.presenters.receipt import run_receipt
from runs.presenters.state import run_people_state
from runs.services.idempotency import idempotency_keys_prune
from runs.services.retention import PruneProgress, runs_prune
from runs.selectors import (
    effect_transition_list,
    effects_stop_list,
    run_effect_rows,
    run_get,
    run_latest_messages,
    run_leg_list,
    run_list,
)
from runs.runtime.usage import total_tokens_of
from runs.services.fork import run_fork
from runs.services.lifecycle import run_cancel, run_requeue
from runs.services.stop_switch import effects_release, effects_stop

#: How `follow` ends: the run is done and fine, or it needs a person (exit 1).
FOLLOW_DONE = {Run.Status.COMPLETED, Run.Status.CANCELLED}
FOLLOW_FAILED = {Run.Status.FAILED, Run.Status.NEEDS_REVIEW}

#: `follow --timeout` ran out (the convention of timeout(1)).
TIMEOUT_EXIT_CODE = 124


def _whole_number(minimum: int, *, unit: str = ""):
    """An argparse type: a whole number of at least ``minimum``, with a message naming the problem."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid whole number{unit and ' of ' + unit}: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more{unit and ' ' + unit}")
        return value

    return parse


_positive_int = _whole_number(1)
_days = _whole_number(0, unit="days")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value


#: How each progress event other than a text delta reads on its own line (``where``: the sub-agent's path).
_EVENT_LINES = {
    "step": "step {event.step_index}:",
    "tool_call": "  ->{where} {event.text}",
    "tool_result": "  <-{where} {event.text}",
    "approval": "approval needed{where}: {event.text}",
    "recovery": "(recovery) {event.text}",
    "error": "error: {event.text}",
    "retry": "(retry) {event.text}",
}


class Command(BaseCommand):
    help = ("Operators' view of runs: list, show, follow, resume, cancel, export (the recovery receipt), fork (a new "
            "run from a checkpoint), prune; resolve an effect that needs review; stop-effects (the stop switch).")

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
        cancel.add_argument("--reason", default="", help="Why; kept with who cancelled and shown with the run.")
        cancel.add_argument("--as", "--user", dest="username", metavar="USER",
                            help="Who cancels it (recorded); without it the cancel is the system's.")

        fork = actions.add_parser(
            "fork", help="Start a new run of the same agent from the run's checkpoint of STEP_INDEX (its latest of "
            "that step): nothing the run did is done again; its approvals go to reviewers.")
        fork.add_argument("run_id")
        fork.add_argument("step_index", type=_whole_number(0))
        fork.add_argument("--run-id", dest="new_run_id", metavar="ID",
                          help="The new run's id (default: RUN_ID-fork-N).")
        fork.add_argument("--as", "--user", dest="username", metavar="USER",
                          help="Who forks it (its creator); without it the fork is the system's.")

        prune = actions.add_parser(
            "prune", help="Remove finished runs' journals, checkpoints and messages, keeping their receipts; and "
            "expired idempotency keys."
        )
        prune.add_argument("--older-than", dest="older_than", type=_days, required=True, metavar="DAYS",
                           help="Only runs finished (and untouched) for at least this many days.")
        prune.add_argument("--dry-run", action="store_true", help="Count what would be removed; remove nothing.")
        prune.add_argument("--batch-size", type=_positive_int, default=100, help="Runs per transaction (100).")

        export = actions.add_parser("export", help="The run's recovery receipt as JSON.")
        export.add_argument("run_id")
        export.add_argument("-o", "--output", metavar="FILE", help="Write the receipt to FILE instead of stdout.")

        resolve = actions.add_parser(
            "resolve", help="Resolve an effect that needs review: retry it with the same operation id, mark it "
            "committed with a receipt, or abandon it (the run continues with an error result).")
        resolve.add_argument("run_id")
        resolve.add_argument("operation_id")
        resolve.add_argument("--action", dest="resolution", required=True, choices=RESOLVE_ACTIONS)
        resolve.add_argument("--reason", required=True, help="Why; kept with the resolution.")
        resolve.add_argument("--receipt", metavar="JSON", help="The outcome, a JSON object (needed by commit).")
        resolve.add_argument("--as", dest="username", required=True, metavar="USER",
                             help="Who resolves it: a user with the reviewer permission (runs.resolve_effect).")

        stop = actions.add_parser(
            "stop-effects", help="The stop switch: no new effect is attempted (every agent, or --agent); runs that "
            "reach one wait. --release lets them continue.")
        stop.add_argument("--agent", help="Only this agent's effects (default: every agent).")
        stop.add_argument("--release", action="store_true", help="Release the switch instead; held runs continue.")
        stop.add_argument("--reason", default="", help="Why effects are stopped (shown with the switch).")
        stop.add_argument("--as", dest="username", metavar="USER", help="Who flips the switch (recorded).")

    def handle(self, *args, action: str, **options: Any) -> None:
        try:
            getattr(self, f"handle_{action.replace('-', '_')}")(**options)
        except (RunNotFound, RunAlreadyExists, RunNotResumable, SealedDataError, UnknownAgent, PermissionDenied) as exc:
            raise CommandError(str(exc)) from None
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        except BrokenPipeError:  # `runs show ID | head`: the reader left; nothing more to say
            import os
            import sys

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

    # ------------------------------------------------------------------ list

    def handle_list(self, *, status: str | None, agent: str | None, limit: int, **options: Any) -> None:
        runs = list(run_list(status=status, agent=agent)[:limit])
        rows = [
            (run.run_id, run.agent, run.status, run.step_index, total_tokens_of(run.usage), run.updated_at)
            for run in runs
        ]
        self.stdout.write(table(["RUN", "AGENT", "STATUS", "STEP", "TOKENS", "UPDATED"], rows, empty="No runs."))

    # ------------------------------------------------------------------ show

    def handle_show(self, *, run_id: str, **options: Any) -> None:
        run = run_get(run_id=run_id)
        legs = list(run_leg_list(run=run))
        effects = list(run_effect_rows(run=run))
        pending = approval_pending_list(run=run)
        state = run_people_state(run, legs=legs, effects=effects)
        out = self.stdout
        out.write(f"Run {run.run_id} ({run.agent or 'no agent'})")
        if run.thread is not None:
            out.write(f"  Thread:   {run.thread.thread_id}, turn {run.turn} of {run.thread.turns.count()}")
        if run.is_fork:
            origin = run.forked_from.run_id if run.forked_from is not None else "a run deleted since"
            out.write(f"  Forked:   from {origin}, step {run.forked_from_step}")
        out.write(f"  State:    {state.label}  [{run.status}]")
        out.write(f"  Why:      {state.why}")
        out.write(f"  Next:     {state.next_action}")
        usage = run.usage or {}
        out.write(
            f"  Step:     {run.step_index}    Tokens: {total_tokens_of(usage)}"
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
        ends = run_leg_ends(run, legs)  # a dead worker's leg ends "interrupted", when that was detected
        out.write(_indent(table(
            ["#", "KIND", "EPOCH", "WORKER", "STARTED", "ENDED", "FINISH", "ERROR"],
            [(end.leg.number, end.leg.kind, end.leg.owner_epoch, end.leg.worker_id, end.leg.started_at,
              end.end_at or "running", end.finish or "-",
              one_line(end.leg.error, limit=50) if end.leg.error else "-") for end in ends],
        )))
        for end in ends:
            if end.is_interrupted:
                out.write(f"  Leg {end.leg.number} interrupted: {interruption_text(end, run)}")
        out.write("")
        out.write("Effects")
        out.write(_indent(table(
            ["OPERATION", "TOOL", "STATUS", "ATTEMPTS", "EPOCH", "RECEIPT"],
            [(effect.operation_id, effect.tool_name, effect.status, effect.attempts, effect.owner_epoch,
              one_line(effect.receipt, limit=60) if effect.receipt else (effect.error or "-")) for effect in effects],
        )))
        for effect in effects:
            if effect.status == effect.Status.NEEDS_REVIEW:
                self._write_evidence(effect)
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
        progress = JournalProgress(run.run_id)
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
                pending = approval_pending_list(run=run)
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
        line = _EVENT_LINES.get(event.kind)
        if line is not None:
            where = f" [{' > '.join(event.agent_path)}]" if event.agent_path else ""
            self.stdout.write(line.format(event=event, where=where))

    # ---------------------------------------------------- resume, cancel

    def handle_resume(self, *, run_id: str, **options: Any) -> None:
        run = run_requeue(run_id=run_id)
        self.stdout.write(f"Run {run.run_id} is queued for another leg; a worker will pick it up.")

    def handle_cancel(self, *, run_id: str, reason: str, username: str | None, **options: Any) -> None:
        user = _user_named(username) if username else None
        run = run_cancel(run_id=run_id, user=user, reason=reason)
        if run.status == Run.Status.CANCELLED:
            self.stdout.write(f"Run {run.run_id} cancelled.")
        else:
            self.stdout.write(f"Run {run.run_id}: cancellation requested; its running leg stops within a second.")

    def handle_fork(self, *, run_id: str, step_index: int, new_run_id: str | None, username: str | None,
                    **options: Any) -> None:
        user = _user_named(username) if username else None
        fork = run_fork(run_id=run_id, step_index=step_index, user=user, new_run_id=new_run_id)
        self.stdout.write(f"Run {fork.run_id} forked from step {step_index} of run {run_id}; it is queued and a "
                          "worker will pick it up.")

    def _write_evidence(self, effect: Any) -> None:
        """An effect that needs review: its ledger entries (what reconciliation read) and the three controls."""
        out = self.stdout
        out.write("")
        out.write(f"Needs review: {effect.tool_name} {effect.operation_id}")
        out.write(f"  request: {json.dumps(effect.request, ensure_ascii=False, sort_keys=True)}")
        for transition in effect_transition_list(effect=effect):
            evidence = f"  {one_line(transition.evidence, limit=80)}" if transition.evidence else ""
            out.write(f"  {when(transition.at)}  {transition.from_status or '-'} -> {transition.to_status}  "
                      f"epoch {transition.owner_epoch}, {transition.actor_kind} {transition.actor}, "
                      f"{transition.via}: {transition.note}{evidence}")
        command = f"manage.py runs resolve {effect.run.run_id} {effect.operation_id}"
        out.write(f"  Resolve: {command} --action retry|commit|abandon --reason WHY --as USER"
                  " [--receipt JSON]")

    # ----------------------------------------------------------- resolve, stop-effects

    def handle_resolve(self, *, run_id: str, operation_id: str, resolution: str, reason: str, receipt: str | None,
                       username: str, **options: Any) -> None:
        user = _user_named(username)
        given = None
        if receipt is not None:
            try:
                given = json.loads(receipt)
            except json.JSONDecodeError as exc:
                raise CommandError(f"--receipt is not JSON: {exc.msg} (at character {exc.pos}).") from None
        effect = effect_resolve(run_id=run_id, operation_id=operation_id, action=resolution, reason=reason,
                                receipt=given, user=user)
        run = effect.run
        run.refresh_from_db()
        self.stdout.write(f"Effect {effect.operation_id} resolved ({resolution}) by {user.get_username()}: now "
                          f"{effect.get_status_display().lower()}. Run {run.run_id} is {run.status}.")

    def handle_stop_effects(self, *, agent: str | None, release: bool, reason: str, username: str | None,
                            **options: Any) -> None:
        user = _user_named(username) if username else None
        scope = f"agent {agent}" if agent else "every agent"
        if release:
            queued = effects_release(agent=agent, user=user)
            self.stdout.write(f"Effects released for {scope}; {queued} held run(s) queued to continue.")
            still = [switch.agent or "every agent" for switch in effects_stop_list()]
            if still:
                self.stdout.write(f"Still stopped: {', '.join(still)}.")
            return
        effects_stop(agent=agent, reason=reason, user=user)
        self.stdout.write(f"Effects are stopped for {scope}: no new effect is attempted; runs that reach one wait. "
                          "Release with: manage.py runs stop-effects"
                          + (f" --agent {agent}" if agent else "") + " --release")

    # ---------------------------------------------------------------- export

    def handle_prune(self, *, older_than: int, dry_run: bool, batch_size: int, **options: Any) -> None:
        verb = "would remove" if dry_run else "removed"

        def report(progress: PruneProgress) -> None:
            self.stdout.write(
                f"{progress.runs_done}/{progress.runs_total} runs: {verb} {progress.journal_parts} journal parts, "
                f"{progress.checkpoints} checkpoints, {progress.messages} messages"
            )

        done = runs_prune(older_than_days=older_than, receipt=run_receipt, dry_run=dry_run, batch_size=batch_size,
                          on_progress=report)
        if not done.runs_total:
            self.stdout.write(f"No finished run is older than {older_than} days.")
        elif dry_run:
            self.stdout.write("Dry run: nothing was removed.")
        else:
            self.stdout.write(f"Pruned {done.runs_done} runs; their receipts are kept (runs export).")
        # Idempotency keys answer repeats for 24 hours, whatever --older-than says; past that they are only rows.
        keys = idempotency_keys_prune(dry_run=dry_run)
        self.stdout.write(f"{verb.capitalize()} {keys} expired idempotency key{'s' if keys != 1 else ''}.")

    def handle_export(self, *, run_id: str, output: str | None, **options: Any) -> None:
        run = run_get(run_id=run_id)
        # A pruned run's records are gone; its receipt was kept as it stood then.
        receipt = json.loads(run.pruned_receipt) if run.pruned_at else run_receipt(run)
        text = json.dumps(receipt, ensure_ascii=False, indent=2)
        if output is None:
            self.stdout.write(text)
            return
        try:
            Path(output).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"Cannot write {output}: {exc.strerror}.") from None
        self.stdout.write(f"Wrote the recovery receipt of run {run_id} to {output}.")


# ------------------------------------------------------------------------ helpers


def _user_named(username: str) -> Any:
    try:
        return get_user_model().objects.get_by_natural_key(username)
    except get_user_model().DoesNotExist:
        raise CommandError(f"No user named {username!r}.") from None


def _last_text_message(run: Run) -> dict[str, Any] | None:
    for message in reversed(run_latest_messages(run=run)):
        if message_text(message):
            return message
    return None


def _indent(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line for line in text.splitlines()) or prefix
