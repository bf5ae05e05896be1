"""Long-lived processes freeze what start-up loaded, so the garbage collector's full collections (which stop
the event loop) walk only what came after (deuz_project.heap); a worker opens its database pool at start-up
(deuz_project.startup)."""

from __future__ import annotations

SERVED = """
import gc, sys
import deuz_project.asgi
print(gc.get_freeze_count(), "deuz_project.urls" in sys.modules)
"""

WORKER = """
import gc
import django
django.setup()
from django.core.management import call_command
import runs.management.commands.worker as worker
worker.run_worker = lambda **options: print("claiming with", gc.get_freeze_count(), "frozen")
call_command("worker", concurrency=1)
"""


def test_the_served_application_freezes_its_start_up_with_the_views_loaded(run_python):
    result = run_python(SERVED)
    assert result.returncode == 0, result.stderr
    frozen, urls_loaded = result.stdout.split()
    assert int(frozen) > 10_000
    assert urls_loaded == "True"


def test_a_worker_freezes_its_start_up_before_it_claims(run_python):
    result = run_python(WORKER, DJANGO_SETTINGS_MODULE="deuz_project.settings")
    assert result.returncode == 0, result.stderr
    frozen = int(result.stdout.split("claiming with ")[1].split()[0])
    assert frozen > 10_000


WORKER_POOL = """
import django
django.setup()
from django.core.management import call_command
from django.db import connection
import runs.management.commands.worker as worker
import time
started = time.monotonic()
worker.run_worker = lambda **options: print("pool closed:", connection.pool.closed, "claiming after",
                                           round(time.monotonic() - started), "s")
call_command("worker", concurrency=1)
"""


def test_a_worker_opens_its_database_pool_before_it_claims_and_a_database_not_up_holds_it_briefly(run_python):
    # Its warm-up (deuz_project.startup) asks the pool for a connection no server answers: it gives up after
    # runs.stores.warmup.CONNECT_SECONDS, says so, and the worker goes on (its first claim connects, or waits).
    result = run_python(WORKER_POOL, DJANGO_SETTINGS_MODULE="deuz_project.settings",
                        DATABASE_URL="postgres://nobody@127.0.0.1:9/no-such-database")
    assert result.returncode == 0, result.stderr
    pool_closed, waited = result.stdout.strip().splitlines()[-1].removeprefix("pool closed: ").split(" claiming after ")
    assert pool_closed == "False" and int(waited.removesuffix(" s")) < 10
    assert "The worker's warm-up failed" in result.stderr
