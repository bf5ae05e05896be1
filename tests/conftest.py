"""Shared fixtures: users per role and their signed-in clients, runs in known states; folder-specific ones live next
to their tests. Django is imported inside the fixtures, so the pure runtime's tests also run without it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.environment import REPO_ROOT, clean_env

_STATIC_ROOT = Path(tempfile.gettempdir()) / f"deuz-test-static-{os.getpid()}"
# The liveness tokens' folder of the SQLite test database (deuz_project.settings names it after this process); the
# files of processes the tests killed stay in it.
_LIVENESS_FOLDER = Path(tempfile.gettempdir()) / f"deuz-test-{os.getpid()}.sqlite3.liveness"


def pytest_configure(config):
    """The servers the tests start collect their static files here, one folder per test process, so two test
    runs at once (CI runs the SQLite and the PostgreSQL passes side by side) never write the same files."""
    os.environ.setdefault("DEUZ_STATIC_ROOT", str(_STATIC_ROOT))


def pytest_unconfigure(config):
    shutil.rmtree(_STATIC_ROOT, ignore_errors=True)
    shutil.rmtree(_LIVENESS_FOLDER, ignore_errors=True)


@pytest.fixture(autouse=True)
def liveness_watches():
    """Each test's liveness watches (the owners its claims and follows watched) end with it: on PostgreSQL each holds
    a connection, which would keep the test database from being dropped."""
    yield
    from runs.ownership.liveness import liveness_watches_close

    liveness_watches_close()


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Hash test passwords with MD5: the production hasher costs about a second per user."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def run_python():
    """Run a Python snippet in a fresh interpreter at the repository root, Deuz variables cleared."""

    def run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO_ROOT,
            env=clean_env(**env),
            capture_output=True,
            text=True,
            timeout=60,
        )

    return run


@pytest.fixture
def drain_runs(settings):
    """Run every claimable leg in this process until none is left; returns how many legs ran."""
    from asgiref.sync import async_to_sync

    from runs.execution.worker import Worker

    settings.DEUZ_DEMO_DELAY_MS = 0

    def drain(max_legs: int = 50) -> int:
        return async_to_sync(Worker(worker_id="test-worker", concurrency=1).drain)(max_legs=max_legs)

    return drain


@pytest.fixture
def enforced_csp(settings):
    """The policy as production sends it (enforced); the test process runs with DEBUG's report-only default."""
    settings.SECURE_CSP = settings.SECURE_CSP or settings.SECURE_CSP_REPORT_ONLY
    settings.SECURE_CSP_REPORT_ONLY = {}


@pytest.fixture
def token_client():
    """An APIClient that authenticates as ``user`` with `Authorization: Token KEY`, as API clients do."""
    from rest_framework.test import APIClient

    from tests.factories import token_of

    def make(user) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token_of(user)}")
        return client

    return make


@pytest.fixture
def reviewer(db):
    """A user in the reviewers group (may decide approvals and resolve effects)."""
    from approvals.roles import REVIEWERS_GROUP
    from tests.factories import make_user

    return make_user("rita", REVIEWERS_GROUP)


@pytest.fixture
def outsider(db):
    """Signed in, without the reviewers' permission."""
    from tests.factories import make_user

    return make_user("oscar")


@pytest.fixture
def reviewer_client(token_client, reviewer):
    return token_client(reviewer)


@pytest.fixture
def outsider_client(token_client, outsider):
    return token_client(outsider)


#: Every role the pages know, as fixture names (the authorization matrix walks them all).
ROLES = ["anonymous", "plain", "owner", "support", "reviewer", "staff", "superuser"]


@pytest.fixture
def users(db) -> dict:
    """One user per role: plain (signed in, no group), owner (started the runs below), support, reviewer,
    staff (the admin, no group) and superuser."""
    from approvals.roles import REVIEWERS_GROUP, SUPPORT_GROUP
    from tests.factories import make_user

    return {
        "plain": make_user("pat"),
        "owner": make_user("olga"),
        "support": make_user("sue", SUPPORT_GROUP, is_staff=True),
        "reviewer": make_user("rita", REVIEWERS_GROUP, is_staff=True),
        "staff": make_user("stan", is_staff=True),
        "superuser": make_user("root", is_staff=True, is_superuser=True),
    }


@pytest.fixture
def browser_for(users):
    """A Django test client signed in as the role's user (none for "anonymous")."""
    from django.test import Client

    def make(role: str, **options) -> Client:
        client = Client(**options)
        if role != "anonymous":
            client.force_login(users[role])
        return client

    return make


@pytest.fixture
def start(users):
    """Start a run of ``agent`` as the owner (or ``user``), asked ``text`` or what its demo agent is asked."""
    from tests.factories import make_queued_run

    def start_run(run_id: str, *, agent: str = "reimbursement", text: str | None = None, user=None):
        messages = None if text is None else [{"role": "user", "content": text}]  # None: what the agent is asked
        return make_queued_run(run_id, agent=agent, messages=messages, user=users["owner"] if user is None else user)

    return start_run


@pytest.fixture
def suspended(users, drain_runs):
    """The owner's reimbursement run r1, waiting for its payment's approval."""
    from tests.factories import make_suspended_run

    return make_suspended_run(drain_runs, "r1", user=users["owner"])


@pytest.fixture
def decide(users, drain_runs):
    """Record a verdict on ``request`` as the reviewer, then run the run to its end."""
    from tests.factories import verdict

    def record(request, *, approved: bool, reason: str = "", run: bool = True) -> None:
        verdict(request, approved=approved, reason=reason, user=users["reviewer"])
        if run:
            drain_runs()

    return record


@pytest.fixture
def workers(tmp_path):
    """Start `manage.py worker` processes against the test database; all are stopped at the end."""
    from tests.processes import WorkerProcess

    started = []

    def start(name: str, **env: str):
        worker = WorkerProcess(name, tmp_path, **env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()
