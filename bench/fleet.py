"""The processes and clients of the benchmarks that need a real deployment (manage.py load, and the fleet parts
of manage.py bench: verdict to motion, the live tail, fan-out, throughput): a daphne (`manage.py serve`) with
or without embedded workers, `manage.py worker` processes, API users, and followers of run streams over SSE
and WebSocket that note when each part arrived.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import websockets
from django.db import connection
from httpx_sse import aconnect_sse

from bench.child_processes import REPO_ROOT, processes_stop

__all__ = ["Fleet", "Follower", "ProcessStats", "api_users", "closing"]


@dataclass
class ProcessStats:
    peak_rss: int = 0
    peak_connections: int = 0
    samples: list[tuple[float, int]] = field(default_factory=list)


class Fleet:
    """The processes under test: one daphne (``serve_workers`` embedded workers; 0 for none, or no daphne at all
    with ``serve=False``) and ``workers`` `manage.py worker` processes, each logging to ``log_dir``."""

    def __init__(self, *, database_url: str, redis_url: str, log_dir: Path, workers: int = 2, concurrency: int = 16,
                 serve: bool = True, serve_workers: int = 0, env: dict[str, str] | None = None,
                 settings_module: str = "deuz_project.settings", app_prefix: str = "deuz-load-") -> None:
        self.database_url, self.redis_url, self.log_dir = database_url, redis_url, log_dir
        self.worker_count, self.concurrency = workers, concurrency
        self.serve, self.serve_workers = serve, serve_workers
        self.extra_env, self.settings_module, self.app_prefix = dict(env or {}), settings_module, app_prefix
        self.workers: dict[str, subprocess.Popen] = {}
        self.server: subprocess.Popen | None = None
        self.url = ""
        self.stats: dict[str, ProcessStats] = defaultdict(ProcessStats)

    def _env(self, name: str) -> dict[str, str]:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": self.settings_module, "DATABASE_URL": self.database_url,
               "REDIS_URL": self.redis_url, "PGAPPNAME": f"{self.app_prefix}{name}", **self.extra_env}
        env.pop("DEUZ_FAULT", None)
        return env

    def start(self, *, workers: bool = True) -> None:
        if self.serve:
            self._start_server()
        if workers:
            self.start_workers()

    def _start_server(self) -> None:
        log = open(self.log_dir / "server.log", "w")  # noqa: SIM115 (kept open for the child's life)
        self.server = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", "0", "--workers",
             str(self.serve_workers)],
            cwd=REPO_ROOT, env=self._env("server"), stdout=subprocess.PIPE, stderr=log, text=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.server.stdout.readline()
            if not line:
                break
            if "Deuz is serving at " in line:
                self.url = line.split("Deuz is serving at ", 1)[1].split()[0]
                break
        if not self.url:
            raise RuntimeError(f"daphne did not start; see {self.log_dir / 'server.log'}")
        # The rest of daphne's output (its access log) is copied to its log, so the pipe never fills up.
        threading.Thread(target=self._drain, args=(self.server.stdout, log), daemon=True).start()

    @staticmethod
    def _drain(stream: Any, log: Any) -> None:
        for line in stream:
            log.write(line)
        log.flush()

    def start_workers(self) -> None:
        for index in range(self.worker_count):
            self.start_worker(f"worker-{index + 1}")

    def start_worker(self, name: str) -> None:
        log = open(self.log_dir / f"{name}.log", "a")  # noqa: SIM115
        self.workers[name] = subprocess.Popen(
            [sys.executable, "manage.py", "worker", "--concurrency", str(self.concurrency)],
            cwd=REPO_ROOT, env=self._env(name), stdout=log, stderr=subprocess.STDOUT,
        )

    def kill_one(self) -> str:
        name = random.choice(sorted(self.workers))
        self.workers[name].send_signal(signal.SIGKILL)
        self.workers[name].wait()
        self.start_worker(name)
        return name

    def sample(self, *, connections: bool = True) -> None:
        """Each process's memory now (peaks kept), and on PostgreSQL its database connections."""
        processes = {"server": self.server, **self.workers}
        for name, process in processes.items():
            try:
                rss = psutil.Process(process.pid).memory_info().rss
            except (psutil.Error, AttributeError):
                continue
            stats = self.stats[name]
            stats.peak_rss = max(stats.peak_rss, rss)
            stats.samples.append((time.monotonic(), rss))
        if not connections or connection.vendor != "postgresql":
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT application_name, count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name LIKE %s GROUP BY application_name", [f"{self.app_prefix}%"]
            )
            for application, count in cursor.fetchall():
                stats = self.stats[application.removeprefix(self.app_prefix)]
                stats.peak_connections = max(stats.peak_connections, count)

    def cpu_seconds(self) -> dict[str, float]:
        """User + system CPU each live process has used so far."""
        used = {}
        for name, process in {"server": self.server, **self.workers}.items():
            try:
                times = psutil.Process(process.pid).cpu_times()
            except (psutil.Error, AttributeError):
                continue
            used[name] = times.user + times.system
        return used

    def stop_workers(self) -> None:
        processes_stop(self.workers.values())
        self.workers = {}

    def stop(self) -> None:
        processes_stop([*self.workers.values(), self.server])

    def __enter__(self) -> Fleet:
        """Every process started; all stopped when the block ends."""
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


#: How long a follower waits before it reads a finished run once more: an EventSource's reconnection time, as
#: the SSE stream gives it (runs.api.events ``retry:``), and the same for a WebSocket, which is not told.
RECONNECT_MS = 1000
#: How long a follower waits after a stream ends before it asks whether its run is done (or reconnects).
RECHECK_AFTER = 0.3


class Follower:
    """Follows one run to its end over SSE or a WebSocket, reconnecting from its cursor, keeping every seq and
    when it first arrived (``received``, wall-clock seconds, comparable with the journal's ``created_at``)."""

    def __init__(self, run_id: str, *, transport: str, base_url: str, token: str, is_done: Callable[[str], Any],
                 cursor: int = -1):
        self.run_id, self.transport, self.base_url, self.token = run_id, transport, base_url, token
        self.is_done = is_done
        self.start_cursor = cursor
        self.seqs: list[int] = []
        self.received: dict[int, float] = {}
        self.connected_at: float | None = None  # when the first connection's stream opened
        self.first_part = asyncio.Event()
        self.errors: list[str] = []  # error parts the stream sent (the follower then reconnects)
        self.complete = False
        self._seen_when_done: int | None = None  # parts seen when the run was first found done
        self.retry_ms = RECONNECT_MS  # the SSE stream's ``retry:``, once it has said it

    @property
    def cursor(self) -> int:
        return self.seqs[-1] if self.seqs else self.start_cursor

    async def follow(self, client: httpx.AsyncClient, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                ended = await (self._sse(client) if self.transport == "sse" else self._websocket())
            except (httpx.HTTPError, websockets.WebSocketException, OSError):
                ended = False
            # Before anything else: a turn ended (waiting for a verdict) or the connection dropped. The run's
            # status is asked only after, so this process's query is not in the way of the receipts it times
            # while the other runs end.
            await asyncio.sleep(RECHECK_AFTER)
            if ended and await self.is_done(self.run_id):
                if self._seen_when_done == len(self.seqs):
                    self.complete = True
                    return
                # The run finished after this stream's [DONE] (a turn that ended at a suspension, then the leg
                # after the verdict): read once more from the cursor, as a client does, before calling it done,
                # after the reconnection time the SSE stream gives (``retry:``), as an EventSource waits.
                self._seen_when_done = len(self.seqs)
                await asyncio.sleep(max(0.0, self.retry_ms / 1000 - RECHECK_AFTER))

    def _opened(self) -> None:
        if self.connected_at is None:
            self.connected_at = time.time()

    def _take(self, seq: int) -> None:
        self.received.setdefault(seq, time.time())
        self.seqs.append(seq)
        self.first_part.set()

    async def _sse(self, client: httpx.AsyncClient) -> bool:
        headers = {"Authorization": f"Token {self.token}", "Last-Event-ID": str(self.cursor)}
        async with aconnect_sse(client, "GET", f"{self.base_url}api/runs/{self.run_id}/events/",
                                headers=headers, timeout=httpx.Timeout(10, read=60)) as source:
            self._opened()
            async for event in source.aiter_sse():
                if event.retry is not None:
                    self.retry_ms = event.retry
                if not event.data:  # a comment (": keep-alive"), which httpx_sse hands on as an empty event
                    continue
                if event.data == "[DONE]":
                    return True
                if json.loads(event.data).get("type") == "error":
                    # An error part has no id of its own (SSE keeps the last one): the client reconnects.
                    self.errors.append(json.loads(event.data)["error"].get("name", "?"))
                    return False
                if event.id not in (None, ""):
                    self._take(int(event.id))
        return False

    async def _websocket(self) -> bool:
        url = self.base_url.replace("http://", "ws://") + f"ws/runs/{self.run_id}/?cursor={self.cursor}"
        headers = {"Authorization": f"Token {self.token}"}
        async with websockets.connect(url, additional_headers=headers, origin=self.base_url.rstrip("/"),
                                      open_timeout=10, max_queue=None) as socket:
            self._opened()
            async for message in socket:
                frame = json.loads(message)
                if frame.get("done"):
                    return True
                if frame.get("seq") is not None:
                    self._take(frame["seq"])
                elif (frame.get("part") or {}).get("type") == "error":
                    self.errors.append(frame["part"]["error"].get("name", "?"))
        return False


def api_users(prefix: str = "load") -> dict[str, str]:
    """API tokens of a plain client (starts and follows runs) and a reviewer (decides approvals)."""
    from django.contrib.auth import get_user_model

    from accounts.services import token_create
    from approvals.services import reviewers_group_ensure

    User = get_user_model()
    client, _ = User.objects.get_or_create(username=f"{prefix}-client")
    reviewer, _ = User.objects.get_or_create(username=f"{prefix}-reviewer")
    reviewer.groups.add(reviewers_group_ensure())
    return {"client": token_create(user=client, name=f"{prefix} benchmark").key,
            "reviewer": token_create(user=reviewer, name=f"{prefix} benchmark").key}


#: The environment of the bench's fleets: the bench settings (DEBUG off, the bench agents) and room for every
#: follower of one user in one process.
BENCH_ENV = {"DEUZ_MAX_STREAMS_PER_USER": "5000"}
BENCH_SETTINGS = "bench.fleet_settings"
TERMINAL = {"completed", "failed", "cancelled", "needs_review"}


async def start_runs(client: httpx.AsyncClient, base_url: str, token: str, *, agent: str, run_ids: list[str],
                     at_once: int = 8) -> None:
    """Start one run of ``agent`` per id through the API, ``at_once`` requests at a time."""
    gate = asyncio.Semaphore(at_once)

    async def start(run_id: str) -> None:
        async with gate:
            answer = await client.post(f"{base_url}api/runs/", json={
                "agent": agent, "run_id": run_id, "messages": [{"role": "user", "content": "Go."}]},
                headers={"Authorization": f"Token {token}"}, timeout=60)
            answer.raise_for_status()

    await asyncio.gather(*(start(run_id) for run_id in run_ids))


def run_statuses(run_ids: list[str]) -> dict[str, str]:
    from runs.models import Run

    return dict(Run.objects.filter(run_id__in=run_ids).values_list("run_id", "status"))


def runs_delete(prefix: str) -> None:
    """The bench's runs go when it is done (their journals, legs and approvals with them)."""
    from runs.models import Run

    Run.objects.filter(run_id__startswith=prefix).delete()


async def closing(coroutine: Any) -> Any:
    """Await ``coroutine``, then close the connections of the thread sync_to_async ran the ORM on (an open one
    keeps a test database from being dropped)."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    try:
        return await coroutine
    finally:
        await sync_to_async(connections.close_all)()
