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


def pytest_configure(config):
    """The servers the tests start collect their static files here, one folder per test process, so two test
    runs at once (CI runs the SQLite and the PostgreSQL passes side by side) never write the same files."""
    os.environ.setdefault("DEUZ_STATIC_ROOT", str(_STATIC_ROOT))


def pytest_unconfigure(config):
    shutil.rmtree(_STATIC_ROOT, ignore_errors=True)


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


def _token_client(user):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def reviewer(django_user_model):
    """A user in the reviewers group (may decide approvals and resolve effects)."""
    from approvals.services import reviewers_group_ensure

    user = django_user_model.objects.create_user(username="rita", password="not-used")
    user.groups.add(reviewers_group_ensure())
    return user


@pytest.fixture
def outsider(django_user_model):
    """Signed in, without the reviewers' permission."""
    return django_user_model.objects.create_user(username="oscar", password="not-used")


@pytest.fixture
def reviewer_client(reviewer):
    return _token_client(reviewer)


@pytest.fixture
def outsider_client(outsider):
    return _token_client(outsider)


#: Every role the pages know, as fixture names (the authorization matrix walks them all).
ROLES = ["anonymous", "plain", "owner", "support", "reviewer", "staff", "superuser"]


@pytest.fixture
def users(django_user_model) -> dict:
    """One user per role: plain (signed in, no group), owner (started the runs below), support, reviewer,
    staff (the admin, no group) and superuser."""
    from approvals.roles import REVIEWERS_GROUP, SUPPORT_GROUP
    from approvals.services import role_group_ensure

    make = django_user_model.objects.create_user
    found = {
        "plain": make("pat", password="not-used"),
        "owner": make("olga", password="not-used"),
        "support": make("sue", password="not-used", is_staff=True),
        "reviewer": make("rita", password="not-used", is_staff=True),
        "staff": make("stan", password="not-used", is_staff=True),
        "superuser": django_user_model.objects.create_superuser("root", password="not-used"),
    }
    found["support"].groups.add(role_group_ensure(SUPPORT_GROUP))
    found["reviewer"].groups.add(role_group_ensure(REVIEWERS_GROUP))
    return found


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
    """Start a run of ``agent`` as the owner (or ``user``)."""
    from runs.services.lifecycle import run_start

    def start_run(run_id: str, *, agent: str = "reimbursement", text: str = "Reimburse exp-1042", user=None):
        return run_start(agent=agent, messages=[{"role": "user", "content": text}], run_id=run_id,
                         user=users["owner"] if user is None else user)

    return start_run


@pytest.fixture
def suspended(start, drain_runs):
    """The owner's reimbursement run r1, waiting for its payment's approval."""
    from approvals.models import ApprovalRequest

    start("r1")
    drain_runs()
    return ApprovalRequest.objects.get(run__run_id="r1")


@pytest.fixture
def decide(users, drain_runs):
    """Record a verdict on ``request`` as the reviewer, then run the run to its end."""
    from approvals.services import approval_decide

    def record(request, *, approved: bool, reason: str = "", run: bool = True) -> None:
        approval_decide(run_id=request.run.run_id, approval_id=request.approval_id, approved=approved,
                        token=request.token, reason=reason, user=users["reviewer"])
        if run:
            drain_runs()

    return record
