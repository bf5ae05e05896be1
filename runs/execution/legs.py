"""One leg of a run: build its agent, start or resume it through the fenced stores, journal every part, close.

This is where the layers meet: the leg passes the session store a save hook that, in each checkpoint's
transaction, flushes the journal (a checkpoint is never ahead of the wire), mirrors step and usage onto the
run, and does the approvals bookkeeping of a suspension. The worker's claim loop (runs.execution.worker) and a
follower continuing a dead run (runs.wire.followers) both run legs through ``leg_execute``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from approvals.selectors import (
    approval_suspension_is_settled,
    approval_suspension_pending_list,
    approval_verdicts_for_resume,
)
from approvals.services import approval_checkpoint_saved
from approvals.signing import approval_signer
from runs.agents import AgentDefinition, LegContext, agent_build
from runs.execution.fault_probe import fault_probe
from runs.ownership.wakeups import CANCEL_POLL_SECONDS, run_cancel_watch, run_cancels_are_pushed
from runs.wire.writer import JournalWriter
from runs.models import Run
from runs.agents.retries import RetryPlan, model_error_failure, retry_plan, retry_policy_default
from runs.runtime import Deps, RunHalted
from runs.runtime.durable import EffectsStopped
from runs.runtime.exceptions import EffectHeldElsewhere, EffectNeedsReview
from runs.runtime.codec import decode_value
from runs.runtime.durable import (
    CheckpointCorruptError,
    DurableSession,
    OwnershipLostError,
    StoreUnavailableError,
    resume_stream_from_checkpoint,
)
from runs.runtime.exceptions import ModelCallError
from runs.runtime.loops import stream_chat
from runs.runtime.redact import redact
from runs.runtime.results import GenerateTextResult
from runs.runtime.stores import SavedCheckpoint
from runs.runtime.usage import empty_usage
from runs.secrets.redaction import service_secrets
from runs.selectors import run_latest_checkpoint_row
from runs.services.lifecycle import (
    Claim,
    run_cancel_state,
    run_checkpoint_mirror,
    run_checkpoint_mirror_changes,
    run_lease_renew,
    run_leg_finish,
)
from runs.stores.ledger import EFFECT_WAIT_FINISH, EFFECTS_STOPPED_FINISH
from runs.stores import get_store
from runs.stores.sessions import RunMirroringSessionStore

__all__ = ["SUSPENSION_NOT_STORED", "leg_execute", "leg_secrets"]

SUSPENSION_NOT_STORED = (
    "The run stopped for a reviewer's verdict, but its suspension could not be stored, so no request can be "
    "decided; a person must check the run's last checkpoint and resume it (manage.py runs resume)."
)

logger = logging.getLogger("deuz.worker")


def _suspension_is_stored(run_id: str) -> bool:
    """True when the run's latest root checkpoint is the suspension the leg just ended with."""
    latest = run_latest_checkpoint_row(run=Run.objects.get(run_id=run_id))
    return latest is not None and latest.status == "suspended"


#: The secrets a leg redacts (runs.secrets.redaction, the one list).
leg_secrets = service_secrets


class _Resuspension:
    """A leg with nothing to run: it repeats the pending approval requests and ends suspended. Shaped like a
    StreamChatResult so the leg's journal and close work the same."""

    def __init__(self, run_id: str, requests: list[dict[str, Any]]) -> None:
        self._parts = [{"type": "tool-approval-request", "approval": request} for request in requests]
        self._parts.append({"type": "finish", "finish_reason": "suspended", "usage": empty_usage()})
        self._result = GenerateTextResult(
            text="", messages=[], response_messages=[], steps=[], usage=empty_usage(), total_usage=empty_usage(),
            finish_reason="suspended", pending_approvals=requests, run_id=run_id,
        )
        self.full_stream = self._iterate()

    async def _iterate(self):
        for part in self._parts:
            yield part

    def parts_from(self, index: int) -> list[dict[str, Any]]:
        return self._parts[index:]

    def parts_count(self) -> int:
        return len(self._parts)

    @property
    def result(self):
        async def result():
            return self._result

        return result()


class _SaveHook:
    """The leg's save hook (``_Leg.on_save``), which can also run in a direct save (runs.stores.sessions's
    DirectSaveHook): there it writes the journal's new parts and nothing else, so a checkpoint that opens or
    settles a suspension (approvals' bookkeeping, on the ORM) takes the ORM's path."""

    __slots__ = ("_before", "leg")

    def __init__(self, leg: _Leg) -> None:
        self.leg = leg
        self._before: Any = None

    def __call__(self, saved: SavedCheckpoint) -> None:
        self._before = (saved.checkpoint, self.leg.writer.position())
        self.leg.on_save(saved)

    def rolled_back(self, checkpoint: Any) -> None:
        """The save of ``checkpoint`` rolled back, after this hook flushed the journal in it: those parts were not
        written, so the writer takes them again at its next flush (its seqs stay gapless)."""
        before, self._before = self._before, None
        if before is not None and before[0] is checkpoint:
            self.leg.writer.rewind(before[1])

    def direct(self, checkpoint: Any, previous_status: str | None, run_pk: int) -> Any:
        if checkpoint["status"] == "suspended" or previous_status == "suspended" or not self.leg.mirror_folded:
            return None
        return self.leg.writer.direct_flush(run_pk)


class _Leg:
    """The state of one leg while it runs: its claim, its journal writer, and the signals that stop it."""

    def __init__(self, claim: Claim, *, fault: Any) -> None:
        self.claim = claim
        self.fault = fault
        self.lost = asyncio.Event()  # another epoch owns the run: write nothing more
        self.signal = asyncio.Event()  # stop the runtime at its next await point
        self.cancel: dict[str, Any] | None = None  # the run's cancel ({"by", "reason"}) once the leg heard of it
        self.writer = JournalWriter(run_id=claim.run_id, epoch=claim.epoch)
        self.definition: AgentDefinition | None = None
        self.last_parts: list[dict[str, Any]] = []  # the worker's own word on the leg, written before its sentinel
        self.mirror_folded = False  # set by session_store

    def on_save(self, saved: SavedCheckpoint) -> None:
        """Inside every checkpoint's transaction: the journal first, then the run's mirror and approvals."""
        self.writer.flush_all_sync()
        if not self.mirror_folded:
            run_checkpoint_mirror(saved)
        approval_checkpoint_saved(saved)

    def session_store(self) -> Any:
        """The leg's fenced session store with its save hook (the benchmarks build theirs here, to measure this).
        A store that can fold the run's mirror into its fence's UPDATE does, saving a statement per save."""
        sessions = get_store("sessions")
        self.mirror_folded = isinstance(sessions, RunMirroringSessionStore) and sessions.folds_run_changes
        hook = _SaveHook(self)
        if self.mirror_folded:
            return sessions.fenced(
                self.claim.run_id, self.claim.epoch, on_save=hook, run_changes=run_checkpoint_mirror_changes
            )
        return sessions.fenced(self.claim.run_id, self.claim.epoch, on_save=hook)

    def _begin_sync(self) -> tuple[Run, AgentDefinition, Any]:
        """The run, its agent and the fenced store, in one trip to the ORM's thread (each trip costs a hop)."""
        claim = self.claim
        run = Run.objects.get(run_id=claim.run_id)
        definition = agent_build(run.agent, leg=LegContext(run.run_id, claim.epoch, self.fault))
        return run, definition, self.session_store()

    async def start(self) -> Any:
        claim = self.claim
        run, definition, store = await sync_to_async(self._begin_sync)()
        self.definition = definition
        options = dict(
            model=definition.model,
            tools=definition.tools,
            max_steps=definition.max_steps,
            system=definition.system,
            approve_tool_call=definition.approve_tool_call,
            approval_signer=approval_signer(),
            approval_max_age_ms=settings.DEUZ_APPROVAL_MAX_AGE_SECONDS * 1000,
            signal=self.signal,
            cancellation=lambda: self.cancel,
            effect_ledger=get_store("effects").fenced(run.run_id, claim.epoch, agent=run.agent,
                                                      worker_id=run.worker_id),
            deps=Deps(fault=self.fault, secrets=leg_secrets(), logger=logging.getLogger("deuz.runtime")),
        )
        checkpoint = await store.aload(run.run_id)
        if checkpoint is None:
            if claim.kind in ("recovery", "retry"):
                # The previous leg (dead, or failed on a model error) may have streamed part of step 0 and saved
                # nothing: followers must set that output aside, as after any interrupted step.
                self.writer.prefix = [{
                    "type": "recovery",
                    "restarted_step_index": 0,
                    "message": "The previous leg was interrupted; the run restarts at step 0.",
                }]
            messages = decode_value(json.loads(run.input_messages))
            return stream_chat(messages=messages, session=DurableSession(store=store, run_id=run.run_id), **options)
        waiting, verdicts = await sync_to_async(_suspension_state)(run)
        if waiting:
            # The previous leg died after storing its suspension: the run still waits for reviewers. Never
            # resume it without their verdicts (that would deny by default); say again what it waits on.
            return _Resuspension(run.run_id, waiting)
        if claim.kind == "recovery" and checkpoint["status"] == "suspended":
            # The dead leg was settling these verdicts (its tool phase may have streamed results): it restarts.
            step = checkpoint["step_index"]
            self.writer.prefix = [{
                "type": "recovery",
                "restarted_step_index": step,
                "message": f"The previous leg was interrupted; the run restarts at step {step}.",
            }]
        return resume_stream_from_checkpoint(store, run.run_id, approval_responses=verdicts, **options)

    async def keep_lease(self) -> None:
        """Renew the lease at a third of its life; on a lost epoch, abort the leg."""
        claim = self.claim
        interval = max(settings.DEUZ_LEASE_SECONDS / 3, 0.2)
        while True:
            await asyncio.sleep(interval)
            try:
                owned = await sync_to_async(run_lease_renew)(run_id=claim.run_id, epoch=claim.epoch)
            except Exception as exc:  # try again; if the lease lapses meanwhile, fencing stops this leg's writes
                logger.warning("Renewing the lease of %s failed (%s).", claim.run_id, type(exc).__name__)
                continue
            if not owned:
                self.lost.set()
                self.signal.set()
                return

    async def check_cancel(self) -> bool:
        """Read the run's cancel; once there is one, keep it for the runtime's ``cancelled`` part and stop the
        runtime. True when the leg is cancelled."""
        state = await sync_to_async(run_cancel_state)(run_id=self.claim.run_id)
        if state is not None:
            self.cancel = state
            self.signal.set()
        return state is not None

    async def watch_cancel(self) -> None:
        """Stop the leg as soon as its run is cancelled: woken by this process's cancels and, on PostgreSQL, by
        NOTIFY (runs.ownership.wakeups), with a read at each wake-up; without a push from other processes, a read
        every CANCEL_POLL_SECONDS, else one at each lease tick as the net for a lost notification."""
        heard = asyncio.Event()
        unregister = run_cancel_watch(self.claim.run_id, heard)
        try:
            while True:
                try:
                    if await self.check_cancel():
                        return
                except Exception as exc:  # read again at the next wake-up or poll
                    logger.warning("Reading the cancel of %s failed (%s).", self.claim.run_id, type(exc).__name__)
                wait = max(settings.DEUZ_LEASE_SECONDS / 3, 0.2) if run_cancels_are_pushed() else CANCEL_POLL_SECONDS
                try:
                    await asyncio.wait_for(heard.wait(), wait)
                except TimeoutError:
                    pass
                heard.clear()
        finally:
            unregister()

    async def end_journal(self, flusher: asyncio.Task[None]) -> None:
        """Every leg ends with its sentinel, also a failed one; a stale owner writes nothing."""
        try:
            await flusher
        except OwnershipLostError:
            self.lost.set()
        if self.lost.is_set():
            return
        try:
            await sync_to_async(self.writer.end_leg_sync)(last_parts=self.last_parts)
        except OwnershipLostError:
            self.lost.set()
            return
        await self.writer.notify()  # the leg's last parts at once; its end once close() settles the run

    async def after_model_error(self, exc: ModelCallError) -> tuple[str, str, RetryPlan | None]:
        """The leg's finish reason, error and retry after a failed model call: a transient error with an attempt
        left schedules a retry (its ``retry`` part goes last in the journal), anything else fails the run."""
        policy = self.definition.retry if self.definition is not None else retry_policy_default()
        row = await Run.objects.filter(run_id=self.claim.run_id).values("retry_attempt", "cancel_requested").afirst()
        previous = row["retry_attempt"] if row else 0
        secrets = leg_secrets()
        if row is not None and row["cancel_requested"]:
            # It ends cancelled, its journal with the cancel's part (run_leg_finish).
            return "aborted", redact(f"{exc.error_name}: {exc.message}", secrets), None
        plan = retry_plan(exc, policy=policy, previous_attempts=previous, now=timezone.now(), secrets=secrets)
        if plan is None:
            return "error", model_error_failure(exc, policy=policy, previous_attempts=previous, secrets=secrets), None
        logger.warning("Leg %s of run %s: %s", self.claim.leg, self.claim.run_id, plan.description)
        self.last_parts = [plan.part()]
        return "retry", plan.description, plan

    async def close(
        self, finish_reason: str, usage: dict, error: str, retry: RetryPlan | None = None, *,
        waits_for_operation: str = "",
    ) -> None:
        """Settle the run's status for the leg's end, then tell its followers (the journal's last word, its
        sentinel, is written already: a follower that hears the end asks the database where the run stands)."""
        claim = self.claim
        if self.lost.is_set():
            logger.warning("Run %s is owned by a newer epoch than %d; this worker abandons it.", claim.run_id, claim.epoch)
            return
        try:
            await sync_to_async(run_leg_finish)(
                run_id=claim.run_id, epoch=claim.epoch, leg=claim.leg, finish_reason=finish_reason, usage=usage,
                error=error, is_suspension_settled=lambda run: approval_suspension_is_settled(run=run), retry=retry,
                waits_for_operation=waits_for_operation,
            )
        except OwnershipLostError:
            logger.warning("Run %s was claimed by another worker before its leg closed; abandoned.", claim.run_id)
            return
        await self.writer.notify(end=True)


def _suspension_state(run: Run) -> tuple[list[Any], Any]:
    """A resumed run's open requests, or else the verdicts to resume with (one trip to the ORM's thread)."""
    waiting = approval_suspension_pending_list(run=run)
    return waiting, (None if waiting else approval_verdicts_for_resume(run=run))


async def leg_execute(claim: Claim, *, fault: Any = None) -> None:
    """Run one leg of ``claim``'s run to its end, renewing the lease, and close it (never raises for a failed
    leg: the run fails, needs review or goes back to the queue; a cancelled task aborts the leg and re-raises)."""
    leg = _Leg(claim, fault=fault or fault_probe(settings.DEUZ_FAULT))
    keeper = asyncio.create_task(leg.keep_lease())
    watcher: asyncio.Task[None] | None = None
    flushed = asyncio.Event()
    flusher = asyncio.create_task(leg.writer.run(flushed))
    finish_reason, usage, error, waits = "error", {}, "", ""
    model_error: ModelCallError | None = None
    try:
        if claim.cancel_requested:  # cancelled while its last owner ran it: the runtime stops before any call
            await leg.check_cancel()
        watcher = asyncio.create_task(leg.watch_cancel())
        stream = await leg.start()
        leg.writer.source = stream
        async for _ in stream.full_stream:
            pass  # the journal writer reads the part log; draining keeps the producer going
        result = await stream.result
        finish_reason, usage = result.finish_reason, result.usage
        if finish_reason == "suspended" and not await sync_to_async(_suspension_is_stored)(claim.run_id):
            # The runtime's saves are best effort, but a review nobody can see must not look like one.
            finish_reason, error = "needs_review", SUSPENSION_NOT_STORED
    except OwnershipLostError:
        leg.lost.set()
    except EffectsStopped as exc:  # a stop switch is on: the run waits, and continues when it is released
        finish_reason, error = EFFECTS_STOPPED_FINISH, exc.reason
    except EffectHeldElsewhere as exc:  # another run is performing this business operation: wait until it settles
        finish_reason, error, waits = EFFECT_WAIT_FINISH, str(exc), exc.operation_id
    except ModelCallError as exc:  # its error part is in the journal already; retried or failed below
        model_error, usage = exc, dict(exc.usage or {})
    except (CheckpointCorruptError, RunHalted) as exc:
        finish_reason, error = "needs_review", redact(str(exc), leg_secrets())
        if isinstance(exc, EffectNeedsReview) and exc.opened_by:  # another run's operation: its resolution frees us
            waits = exc.operation_id or ""
    except (StoreUnavailableError, DatabaseError) as exc:
        # Transient: the run goes back to the queue and a later leg resumes it from its checkpoint.
        logger.warning("Leg %s of run %s lost its store (%s); requeued.", claim.leg, claim.run_id, type(exc).__name__)
        finish_reason, error = "aborted", redact(f"{type(exc).__name__}: {exc}", leg_secrets())
    except asyncio.CancelledError:
        keeper.cancel()
        if watcher is not None:
            watcher.cancel()
        flushed.set()
        await leg.end_journal(flusher)
        await leg.close("aborted", {}, "The worker stopped during this leg.")
        raise
    except Exception as exc:  # a failed leg fails its run, never the worker
        logger.exception("Leg %s of run %s failed.", claim.leg, claim.run_id)
        error = redact(f"{type(exc).__name__}: {exc}", leg_secrets())
    finally:
        keeper.cancel()
        if watcher is not None:
            watcher.cancel()
        flushed.set()
    retry = None
    if model_error is not None:
        try:
            finish_reason, error, retry = await leg.after_model_error(model_error)
        except DatabaseError as exc:  # the run goes back to the queue as after any store outage
            finish_reason, error = "aborted", redact(f"{type(exc).__name__}: {exc}", leg_secrets())
    await leg.end_journal(flusher)
    await leg.close(finish_reason, usage, error, retry, waits_for_operation=waits)
