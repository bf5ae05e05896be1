"""`manage.py load`: load with faults. It needs PostgreSQL and Redis, and says so elsewhere."""

from __future__ import annotations

import sys

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from deuz_project.database_url import database_url
from tests.environment import REPO_ROOT, clean_env
from tests.processes import run_process_group

pytestmark = pytest.mark.django_db(transaction=True)


def test_on_another_database_it_names_what_it_needs():
    if connection.vendor == "postgresql":
        pytest.skip("this database is PostgreSQL: the load itself is tested below")
    with pytest.raises(CommandError, match="needs PostgreSQL"):
        call_command("load", "--runs", "1", "--followers", "1")


def test_followers_beyond_the_runs_are_refused():
    with pytest.raises(CommandError, match="--followers must be between 0 and --runs"):
        call_command("load", "--runs", "2", "--followers", "3")


# The load gives up after its own --timeout and says what it saw; this test's limit is above it and its subprocess's.
@pytest.mark.timeout(360)
def test_a_small_load_with_a_worker_killed_every_few_seconds_loses_and_repeats_nothing(settings):
    if connection.vendor != "postgresql" or not settings.REDIS_URL:
        pytest.skip("the load runs on PostgreSQL and Redis (the suite's second pass in CI)")
    completed = run_process_group(
        [sys.executable, "manage.py", "load", "--runs", "6", "--followers", "4", "--kill-every", "6",
         "--concurrency", "4", "--timeout", "240"],
        cwd=REPO_ROOT, env=clean_env(DATABASE_URL=database_url(), REDIS_URL=settings.REDIS_URL), timeout=330,
    )
    assert completed.returncode == 0 and "Clean: every run finished" in completed.stdout, (
        completed.stdout[-3000:] + completed.stderr[-3000:])
