"""Shared fixtures; app-specific ones live next to their tests."""

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
