"""The worker: claims runs by lease and executes their legs (runs.execution.legs) concurrently on one event loop;
``EmbeddedWorkers`` hosts workers on threads inside the serving process."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connection

from approvals.services import approval_expire_due
from notifications.delivery.drain import outbox_deliver_forever
from observability.tracing import tracing_shutdown
from runs.execution.fault_probe import fault_probe
from runs.execution.legs import leg_execute
from runs.ownership.liveness import LIVENESS_CHECK_SECONDS, LivenessToken, liveness_hold, liveness_on_death
from runs.ownership.wakeups import runs_listen, runs_wake_register
from runs.runtime.mcp import aclose_mcp_sessions
from runs.runtime.providers import aclose_clients
from runs.services.lifecycle import Claim, run_claim

__all__ = ["EmbeddedWorkers", "Worker", "run_worker", "worker_id_default"]

logger = logging.getLogger("deuz.worker")


def worker_id_default() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Worker:
    """Claims up to ``concurrency`` runs at a time and runs each leg while renewing its lease. It holds its liveness
    token (runs.ownership.liveness) while it runs, and takes over at once the runs of workers whose token is free:
    its claims watch the owners of running runs, and a death they hear wakes it."""

    def __init__(self, *, worker_id: str | None = None, concurrency: int = 4, poll_seconds: float = 0.5) -> None:
        if concurrency < 1:
            raise ValueError("A worker needs a concurrency of at least 1.")
        self.worker_id = worker_id or worker_id_default()
        self.concurrency = concurrency
        self.poll_seconds = poll_seconds
        self.stopping = asyncio.Event()
        self.active: dict[str, asyncio.Task[None]] = {}
        self.fault = fault_probe(settings.DEUZ_FAULT)
        self.token: LivenessToken | None = None
        self._owners_checked_at = 0.0

    async def run(self) -> None:
        """Claim and execute until ``stop()``; active legs are aborted then and their runs queued again, and the
        model clients of this event loop are closed."""
        logger.info("Worker %s started (concurrency %d).", self.worker_id, self.concurrency)
        wake = asyncio.Event()
        listener = asyncio.create_task(runs_listen(wake)) if connection.vendor == "postgresql" else None
        unregister = runs_wake_register(wake)  # this process's own commits (embedded workers; SQLite has no NOTIFY)
        loop = asyncio.get_running_loop()
        # An owner's death, heard by a watch this worker's claims left on it: look at the owners at once.
        unwatch = liveness_on_death(lambda worker_id: loop.call_soon_threadsafe(self._owner_died, wake))
        # The outbox's webhooks are delivered beside the legs, so a slow receiver never delays a claim.
        deliveries = asyncio.create_task(
            outbox_deliver_forever(worker_id=self.worker_id, stopping=self.stopping, fault=self.fault),
            name="outbox-deliveries",
        )
        sweep_every, since_sweep = 10, 10
        while not self.stopping.is_set():
            since_sweep += 1
            # Cleared before the claim, not after it: a run queued while the claim runs keeps the event set, so
            # the wait below returns at once instead of at the next poll.
            wake.clear()
            try:
                sweep = since_sweep >= sweep_every
                if sweep:
                    since_sweep = 0
                    await sync_to_async(approval_expire_due)()
                free = self.concurrency - len(self.active)
                claims = await sync_to_async(self._claim)(free, ping=sweep) if free or sweep else []
            except Exception as exc:  # a database blip must not end the worker: back off and claim again
                logger.warning("Claiming runs failed (%s); retrying in %.1f s.", type(exc).__name__, self.poll_seconds * 4)
                await asyncio.sleep(self.poll_seconds * 4)
                continue
            for claim in claims:
                self.active[claim.run_id] = asyncio.create_task(self.execute(claim), name=f"leg:{claim.run_id}")
                self.active[claim.run_id].add_done_callback(lambda task, run_id=claim.run_id: self.active.pop(run_id, None))
            if not claims:
                waiters = [asyncio.ensure_future(self.stopping.wait()), asyncio.ensure_future(wake.wait())]
                try:
                    # A dead process sends nothing: the poll is what finds its runs, so it comes at least as often as
                    # the look at running runs' owners.
                    await asyncio.wait([*waiters, *self.active.values()],
                                       timeout=min(self.poll_seconds, LIVENESS_CHECK_SECONDS),
                                       return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiter in waiters:
                        waiter.cancel()
        unregister()
        unwatch()
        if listener is not None:
            listener.cancel()
        await asyncio.wait([deliveries], timeout=2)  # an attempt under way may finish; else its lease lapses
        deliveries.cancel()
        await asyncio.gather(deliveries, return_exceptions=True)
        for task in list(self.active.values()):
            task.cancel()
        await asyncio.gather(*self.active.values(), return_exceptions=True)
        if self.token is not None:  # after the legs closed: their runs are queued again, none looks dead first
            await sync_to_async(self.token.release)()
            self.token = None
        try:
            await aclose_clients()
        except Exception as exc:  # a connection that will not close cleanly must not keep the worker from stopping
            logger.warning("Closing the model clients failed (%s).", type(exc).__name__)
        try:
            await aclose_mcp_sessions()
        except Exception as exc:  # nor a server that will not stop
            logger.warning("Closing the MCP sessions failed (%s).", type(exc).__name__)
        logger.info("Worker %s stopped.", self.worker_id)

    def stop(self) -> None:
        self.stopping.set()

    def _owner_died(self, wake: asyncio.Event) -> None:
        self._owners_checked_at = 0.0  # the next claim looks at the owners of running runs
        wake.set()

    def _claim(self, free: int, *, ping: bool = False) -> list[Claim]:
        """On the ORM's thread: the worker's liveness token held (taken at the first claim, again after a loss;
        ``ping`` asks the database whether it still is), then up to ``free`` runs claimed, and every
        LIVENESS_CHECK_SECONDS the runs of dead owners among them."""
        if self.token is None:
            self.token = liveness_hold(self.worker_id)
        elif not self.token.ensure(ping=ping):
            return []  # a worker without its token would look dead: it claims nothing until it has it again
        if not free:
            return []
        now = time.monotonic()
        take_over_dead = now - self._owners_checked_at >= LIVENESS_CHECK_SECONDS
        if take_over_dead:
            self._owners_checked_at = now
        return run_claim(worker_id=self.worker_id, limit=free, take_over_dead=take_over_dead)

    async def drain(self, *, max_legs: int = 100) -> int:
        """Execute claimable runs one leg at a time until none is left (tests, `runs resume --now`).
        Returns the number of legs run."""
        legs = 0
        token = await sync_to_async(liveness_hold)(self.worker_id)
        try:
            while legs < max_legs:
                claims = await sync_to_async(run_claim)(worker_id=self.worker_id, limit=1)
                if not claims:
                    return legs
                await self.execute(claims[0])
                legs += 1
            return legs
        finally:
            await sync_to_async(token.release)()

    async def execute(self, claim: Claim) -> None:
        """One leg of the claimed run (runs.execution.legs)."""
        await leg_execute(claim, fault=self.fault)


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
    tracing_shutdown()  # a worker stopping normally exports every span it holds


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
