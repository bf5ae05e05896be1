"""`manage.py serve` end to end: a real daphne process on a free port, then Ctrl-C."""

from __future__ import annotations

import json
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.environment import PRODUCTION_ENV, REPO_ROOT, clean_env
from tests.processes import Served


def get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read()


@pytest.fixture
def served(tmp_path: Path):
    database = tmp_path / "serve.sqlite3"
    server = Served(database=database, env=clean_env(DATABASE_URL=f"sqlite:///{database}", **PRODUCTION_ENV))
    yield server
    server.stop()


def test_serve_migrates_and_answers_health_docs_and_static_files(served):
    base_url = served.wait_for(r"Deuz is serving at (http://\S+/)").group(1)

    status, body = get(base_url + "healthz")
    assert (status, json.loads(body)) == (200, {"status": "ok"})  # migrated DB answers

    status, body = get(base_url + "api/docs/")
    assert status == 200
    asset = re.search(r'src="(/static/drf_spectacular_sidecar/[^"]+\.js)"', body.decode()).group(1)
    status, _ = get(base_url.rstrip("/") + asset)  # collected and served by WhiteNoise
    assert status == 200


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_serve_stops_cleanly_on_ctrl_c_and_sigterm(served, stop_signal):
    served.wait_for(r"Deuz is serving at")
    served.process.send_signal(stop_signal)
    assert served.process.wait(timeout=20) == 0
    served.wait_for(r"Deuz stopped\.")


def test_serve_without_debug_creates_no_demo_reviewer(served):
    served.wait_for(r"Deuz is serving at")
    assert not any("Demo reviewer" in line for line in served.output)
    with sqlite3.connect(served.database) as db:
        assert db.execute("SELECT count(*) FROM auth_user").fetchone() == (0,)


def test_serve_reports_a_port_it_cannot_listen_on(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = clean_env(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", **PRODUCTION_ENV)
        result = subprocess.run(
            [sys.executable, "manage.py", "serve", "--port", str(port)],
            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60,
        )
    assert result.returncode != 0
    assert f"Could not listen on 127.0.0.1:{port}" in result.stderr


def test_serve_runs_queued_runs_with_its_embedded_worker(served):
    served.wait_for(r"Embedded workers: 1")
    env = clean_env(DATABASE_URL=f"sqlite:///{served.database}", DEUZ_DEMO_DELAY_MS="0", **PRODUCTION_ENV)
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-v", "0", "-c",
         "from runs.services.lifecycle import run_start; "
         "run_start(agent='reimbursement', messages=[{'role': 'user', 'content': 'Reimburse exp-1042'}], run_id='served-1')"],
        cwd=REPO_ROOT, env=env, check=True, capture_output=True, timeout=60,
    )
    deadline = time.monotonic() + 60
    status = None
    while time.monotonic() < deadline and status != "suspended":
        with sqlite3.connect(served.database) as db:
            status = db.execute("SELECT status FROM runs_run WHERE run_id = 'served-1'").fetchone()[0]
        time.sleep(0.2)
    assert status == "suspended"


def test_serve_s_embedded_worker_holds_its_liveness_token_until_serve_stops(served):
    """A process that runs legs holds a liveness token (runs.ownership.liveness): `manage.py serve`'s embedded
    worker under ``host:pid:embedded-0``, an flock beside its SQLite database, free once serve has stopped."""
    from runs.ownership.liveness_sqlite import FileLiveness

    served.wait_for(r"Deuz is serving at")
    tokens = FileLiveness(Path(f"{served.database}.liveness"))
    worker_id = f"{socket.gethostname()}:{served.process.pid}:embedded-0"
    deadline = time.monotonic() + 30
    while tokens.dead({worker_id}) and time.monotonic() < deadline:  # taken at the worker's first claim
        time.sleep(0.1)
    assert tokens.dead({worker_id}) == set()
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(timeout=20) == 0
    assert tokens.dead({worker_id}) == {worker_id}
