"""The worker: claims runs by lease and executes their legs concurrently on one event loop."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection

from approvals.services import approval_expire_due, approval_verdicts_for_resume
from runs.agents import LegContext, agent_build
from runs.faults import fault_probe
from runs.journal import JournalWriter
from runs.models import Run
from runs.notify import CHANNEL
from runs.runtime import Deps, RunHalted
from runs.runtime.codec import decode_value
from runs.runtime.durable import (
    CheckpointCorruptError,
    DurableSession,
    OwnershipLostError,
    StoreUnavailableError,
    create_approval_signer,
    resume_stream_from_checkpoint,
)
from runs.runtime.loops import stream_chat
from runs.runtime.redact import redact
from runs.services import (
    Claim,
    run_cancel_requested,
    run_claim,
    run_lease_renew,
    run_leg_finish,
    run_pending_suspension,
)
from runs.stores import get_store

__all__ = ["Worker", "worker_id_default"]

logger = logging.getLogger("deuz.worker")


def worker_id_default() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _secrets() -> tuple[str, ...]:
    values = [settings.DEUZ_APPROVAL_SECRET, settings.SECRET_KEY, *settings.DEUZ_ENCRYPTION_KEYS]
    values += [os.environ.get(name, "") for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")]
    return tuple(value for value in values if value)


class _Resuspension:
    """A leg with nothing to run: it repeats the pending approval requests and ends suspended. Shaped like a
    StreamChatResult so the leg's journal and close work the same."""

    def __init__(self, run_id: str, requests: list[dict[str, Any]]) -> None:
        from runs.runtime.results import GenerateTextResult
        from runs.runtime.usage import empty_usage

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


class Worker:
    """Claims up to ``concurrency`` runs at a time and runs each leg while renewing its lease."""

    def __init__(self, *, worker_id: str | None = None, concurrency: int = 4, poll_seconds: float = 0.5) -> None:
        if concurrency < 1:
            raise ValueError("A worker needs a concurrency of at least 1.")
        self.worker_id = worker_id or worker_id_default()
        self.concurrency = concurrency
        self.poll_seconds = poll_seconds
        self.stopping = asyncio.Event()
        self.active: dict[str, asyncio.Task[None]] = {}
        self.fault = fault_probe(settings.DEUZ_FAULT)
        self.signer = create_approval_signer(secret=settings.DEUZ_APPROVAL_SECRET)

    async def run(self) -> None:
        """Claim and execute until ``stop()``; active legs are aborted then and their runs queued again."""
        logger.info("Worker %s started (concurrency %d).", self.worker_id, self.concurrency)
        wake = asyncio.Event()
        listener = asyncio.create_task(self._listen(wake)) if connection.vendor == "postgresql" else None
        sweep_every, since_sweep = 10, 10
        while not self.stopping.is_set():
            since_sweep += 1
            try:
                if since_sweep >= sweep_every:
                    since_sweep = 0
                    await sync_to_async(approval_expire_due)()
                free = self.concurrency - len(self.active)
                claims = await sync_to_async(run_claim)(worker_id=self.worker_id, limit=free) if free else []
            except Exception as exc:  # a database blip must not end the worker: back off and claim again
                logger.warning("Claiming runs failed (%s); retrying in %.1f s.", type(exc).__name__, self.poll_seconds * 4)
                await asyncio.sleep(self.poll_seconds * 4)
                continue
            for claim in claims:
                self.active[claim.run_id] = asyncio.create_task(self.execute(claim), name=f"leg:{claim.run_id}")
                self.active[claim.run_id].add_done_callback(lambda task, run_id=claim.run_id: self.active.pop(run_id, None))
            if not claims:
                wake.clear()
                waiters = [asyncio.ensure_future(self.stopping.wait()), asyncio.ensure_future(wake.wait())]
                try:
                    await asyncio.wait([*waiters, *self.active.values()], timeout=self.poll_seconds,
                                       return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiter in waiters:
                        waiter.cancel()
        if listener is not None:
            listener.cancel()
        for task in list(self.active.values()):
            task.cancel()
        await asyncio.gather(*self.active.values(), return_exceptions=True)
        logger.info("Worker %s stopped.", self.worker_id)

    async def _listen(self, wake: asyncio.Event) -> None:
        """PostgreSQL: wake the claim loop on NOTIFY instead of waiting for the next poll."""
        import psycopg

        params = connection.settings_dict
        while not self.stopping.is_set():
            try:
                async with await psycopg.AsyncConnection.connect(
                    dbname=params["NAME"], user=params.get("USER") or None, password=params.get("PASSWORD") or None,
                    host=params.get("HOST") or None, port=params.get("PORT") or None, autocommit=True,
                ) as listen_connection:
                    await listen_connection.execute(f"LISTEN {CHANNEL}")
                    async for _ in listen_connection.notifies():
                        wake.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the poll still works; retry the listener later
                logger.warning("LISTEN %s failed (%s); relying on the poll.", CHANNEL, type(exc).__name__)
                await asyncio.sleep(5)

    def stop(self) -> None:
        self.stopping.set()

    async def drain(self, *, max_legs: int = 100) -> int:
        """Execute claimable runs one leg at a time until none is left (tests, `runs resume --now`).
        Returns the number of legs run."""
        legs = 0
        while legs < max_legs:
            claims = await sync_to_async(run_claim)(worker_id=self.worker_id, limit=1)
            if not claims:
                return legs
            await self.execute(claims[0])
            legs += 1
        return legs

    async def execute(self, claim: Claim) -> None:
        """One leg: build the agent, start or resume the run, journal its parts, close the leg."""
        lost = asyncio.Event()
        signal = asyncio.Event()
        keeper = asyncio.create_task(self._keep_lease(claim, signal, lost))
        writer = JournalWriter(run_id=claim.run_id, epoch=claim.epoch)
        flushed = asyncio.Event()
        flusher = asyncio.create_task(writer.run(flushed))
        finish_reason, usage, error = "error", {}, ""
        try:
            stream = await self._start_leg(claim, signal, writer)
            writer.source = stream
            async for _ in stream.full_stream:
                pass  # the journal writer reads the part log; draining keeps the producer going
            result = await stream.result
            finish_reason, usage = result.finish_reason, result.usage
        except OwnershipLostError:
            lost.set()
        except (CheckpointCorruptError, RunHalted) as exc:
            finish_reason, error = "needs_review", redact(str(exc), _secrets())
        except (StoreUnavailableError, DatabaseError) as exc:
            # Transient: the run goes back to the queue and a later leg resumes it from its checkpoint.
            logger.warning("Leg %s of run %s lost its store (%s); requeued.", claim.leg, claim.run_id, type(exc).__name__)
            finish_reason, error = "aborted", redact(f"{type(exc).__name__}: {exc}", _secrets())
        except asyncio.CancelledError:
            keeper.cancel()
            flushed.set()
            await self._end_journal(writer, flusher, lost)
            await self._close(claim, "aborted", {}, "The worker stopped during this leg.", lost)
            raise
        except Exception as exc:  # a failed leg fails its run, never the worker
            logger.exception("Leg %s of run %s failed.", claim.leg, claim.run_id)
            error = redact(f"{type(exc).__name__}: {exc}", _secrets())
        finally:
            keeper.cancel()
            flushed.set()
        await self._end_journal(writer, flusher, lost)
        await self._close(claim, finish_reason, usage, error, lost)

    async def _end_journal(self, writer: JournalWriter, flusher: asyncio.Task[None], lost: asyncio.Event) -> None:
        """Every leg ends with its sentinel, also a failed one; a stale owner writes nothing."""
        try:
            await flusher
        except OwnershipLostError:
            lost.set()
        if lost.is_set():
            return
        try:
            await sync_to_async(writer.end_leg_sync)()
        except OwnershipLostError:
            lost.set()
            return
        await writer.notify()

    async def _close(self, claim: Claim, finish_reason: str, usage: dict, error: str, lost: asyncio.Event) -> None:
        if lost.is_set():
            logger.warning("Run %s is owned by a newer epoch than %d; this worker abandons it.", claim.run_id, claim.epoch)
            return
        try:
            await sync_to_async(run_leg_finish)(
                run_id=claim.run_id, epoch=claim.epoch, leg=claim.leg, finish_reason=finish_reason, usage=usage,
                error=error,
            )
        except OwnershipLostError:
            logger.warning("Run %s was claimed by another worker before its leg closed; abandoned.", claim.run_id)

    async def _start_leg(self, claim: Claim, signal: asyncio.Event, writer: JournalWriter) -> Any:
        run = await Run.objects.aget(run_id=claim.run_id)
        leg = LegContext(run.run_id, claim.epoch, self.fault)
        definition = await sync_to_async(agent_build)(run.agent, leg=leg)
        store = get_store("sessions").fenced(run.run_id, claim.epoch, before_write=writer.flush_all_sync)
        options = dict(
            model=definition.model,
            tools=definition.tools,
            max_steps=definition.max_steps,
            system=definition.system,
            approve_tool_call=definition.approve_tool_call,
            approval_signer=self.signer,
            approval_max_age_ms=settings.DEUZ_APPROVAL_MAX_AGE_SECONDS * 1000,
            signal=signal,
            deps=Deps(fault=self.fault, secrets=_secrets(), logger=logging.getLogger("deuz.runtime")),
        )
        if await store.aload(run.run_id) is None:
            if claim.kind == "recovery":
                # The dead leg streamed part of step 0 and saved nothing: followers must set that output aside.
                writer.prefix = [{
                    "type": "recovery",
                    "restarted_step_index": 0,
                    "message": "The previous leg was interrupted; the run restarts at step 0.",
                }]
            messages = decode_value(json.loads(run.input_messages))
            return stream_chat(messages=messages, session=DurableSession(store=store, run_id=run.run_id), **options)
        waiting = await sync_to_async(run_pending_suspension)(run=run)
        if waiting:
            # The previous leg died after storing its suspension: the run still waits for reviewers. Never
            # resume it without their verdicts (that would deny by default); say again what it waits on.
            return _Resuspension(run.run_id, waiting)
        verdicts = await sync_to_async(approval_verdicts_for_resume)(run=run)
        return resume_stream_from_checkpoint(store, run.run_id, approval_responses=verdicts, **options)

    async def _keep_lease(self, claim: Claim, signal: asyncio.Event, lost: asyncio.Event) -> None:
        """Renew the lease at a third of its life; on a lost epoch or a cancel, abort the leg."""
        interval = max(settings.DEUZ_LEASE_SECONDS / 3, 0.2)
        while True:
            await asyncio.sleep(interval)
            try:
                owned = await sync_to_async(run_lease_renew)(run_id=claim.run_id, epoch=claim.epoch)
                cancel = owned and await sync_to_async(run_cancel_requested)(run_id=claim.run_id)
            except Exception as exc:  # try again; if the lease lapses meanwhile, fencing stops this leg's writes
                logger.warning("Renewing the lease of %s failed (%s).", claim.run_id, type(exc).__name__)
                continue
            if not owned:
                lost.set()
                signal.set()
                return
            if cancel:
                signal.set()


def run_worker(*, concurrency: int, worker_id: str | None = None, poll_seconds: float = 0.5) -> None:
    """Run a worker on a new event loop until SIGINT/SIGTERM."""
    import signal as signals

    close_old_connections()
    worker = Worker(worker_id=worker_id, concurrency=concurrency, poll_seconds=poll_seconds)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signals.SIGINT, signals.SIGTERM):
            try:
                loop.add_signal_handler(sig, worker.stop)
            except (NotImplementedError, RuntimeError):  # not the main thread
                pass
        await worker.run()

    asyncio.run(main())


class EmbeddedWorkers:
    """Workers inside the serving process, each on its own thread and event loop (`manage.py serve`)."""

    def __init__(self, count: int, *, concurrency: int = 4) -> None:
        self.count = count
        self.concurrency = concurrency
        self._threads: list[Any] = []
        self._workers: list[tuple[asyncio.AbstractEventLoop, Worker]] = []

    def start(self) -> None:
        import threading

        for index in range(self.count):
            ready = threading.Event()
            thread = threading.Thread(target=self._run, args=(index, ready), name=f"deuz-worker-{index}", daemon=True)
            thread.start()
            ready.wait(timeout=10)
            self._threads.append(thread)

    def _run(self, index: int, ready: Any) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        worker = Worker(worker_id=f"{worker_id_default()}:embedded-{index}", concurrency=self.concurrency)
        self._workers.append((loop, worker))
        ready.set()
        try:
            loop.run_until_complete(worker.run())
        finally:
            loop.close()
            close_old_connections()

    def stop(self, timeout: float = 10) -> None:
        """Ask every worker to stop (their active legs are aborted and requeued) and wait for the threads."""
        for loop, worker in self._workers:
            if not loop.is_closed():
                loop.call_soon_threadsafe(worker.stop)
        for thread in self._threads:
            thread.join(timeout=timeout)
