"""Liveness tokens on the test database (a session advisory lock on PostgreSQL, an flock on SQLite): held while a
process lives, free the moment it is SIGKILLed, taken again when lost; and the claim that takes over a dead
owner's run, never a live owner's nor its own."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time

import pytest
from django.db import connection

from bench.child_processes import REPO_ROOT, child_env, wait_until
from deuz_project.database_url import database_url
from runs.models import Leg, Run
from runs.ownership import liveness, liveness_postgres
from runs.ownership.liveness import liveness_hold, liveness_on_death, liveness_owners_dead
from runs.services.lifecycle import run_claim
from tests.factories import make_queued_run

pytestmark = pytest.mark.django_db(transaction=True)

_HOLDER = """
import django, sys, time
django.setup()
from runs.ownership.liveness import liveness_hold
liveness_hold(sys.argv[1])
print("held", flush=True)
time.sleep(600)
"""


@pytest.fixture
def holder_process():
    """Start a process that holds a worker id's token until it is killed."""
    started = []

    def start(worker_id: str) -> subprocess.Popen:
        process = subprocess.Popen([sys.executable, "-c", _HOLDER, worker_id], cwd=REPO_ROOT,
                                   env=child_env(DATABASE_URL=database_url()), stdout=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout.readline().strip() == "held"
        return process

    yield start
    for process in started:
        process.kill()
        process.wait()


def test_a_held_token_is_alive_and_a_released_one_is_not():
    token = liveness_hold("w-held")
    assert liveness_owners_dead({"w-held", "w-never"}) == {"w-never"}
    token.release()
    assert liveness_owners_dead({"w-held"}) == {"w-held"}


def test_holds_of_one_id_in_one_process_share_the_token_until_the_last_is_released():
    first, second = liveness_hold("w-shared"), liveness_hold("w-shared")
    first.release()
    first.release()  # a second release of one hold gives nothing more back
    assert liveness_owners_dead({"w-shared"}) == set()
    second.release()
    assert liveness_owners_dead({"w-shared"}) == {"w-shared"}


def test_a_killed_process_s_token_is_free_at_once(holder_process):
    process = holder_process("w-killed")
    assert liveness_owners_dead({"w-killed"}) == set()
    process.send_signal(signal.SIGKILL)
    process.wait()
    # PostgreSQL ends the session when its socket closes; the kernel drops the flock with the process.
    wait_until(lambda: liveness_owners_dead({"w-killed"}) == {"w-killed"}, timeout=2, every=0.02,
               what="the killed process's token to be free")


def test_a_stopped_process_keeps_its_token(holder_process):
    process = holder_process("w-stopped")
    process.send_signal(signal.SIGSTOP)
    try:
        assert liveness_owners_dead({"w-stopped"}) == set()
    finally:
        process.send_signal(signal.SIGCONT)


def test_an_id_a_live_process_holds_cannot_be_held_by_another(holder_process, monkeypatch):
    holder_process("w-taken")
    monkeypatch.setattr(f"runs.ownership.liveness_{'postgres' if connection.vendor == 'postgresql' else 'sqlite'}"
                        "._HOLD_SECONDS", 0.1)
    with pytest.raises(RuntimeError, match="w-taken"):
        liveness_hold("w-taken")


def test_a_lost_token_is_taken_again():
    token = liveness_hold("w-lost")
    try:
        hold = liveness._holds[(liveness._backend(), "w-lost")]
        if connection.vendor == "postgresql":  # the server ends the session (a restart, a timeout)
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(%s)", [hold.handle.info.backend_pid])
        else:  # someone removed the file
            liveness._backend().path("w-lost").unlink()
        wait_until(lambda: liveness_owners_dead({"w-lost"}) == {"w-lost"}, timeout=5, what="the token to be lost")
        assert token.ensure(ping=True)
        assert liveness_owners_dead({"w-lost"}) == set()
    finally:
        token.release()


@pytest.fixture
def deaths():
    """The owners whose death this process's watches heard, each with when (time.monotonic), in order."""
    heard: list[tuple[str, float]] = []

    def died(worker_id: str) -> None:
        heard.append((worker_id, time.monotonic()))

    unregister = liveness_on_death(died)
    yield heard
    unregister()


def test_a_watched_owner_s_death_is_heard_at_once(holder_process, deaths):
    process = holder_process("w-watched")
    assert liveness_owners_dead({"w-watched"}, watch=True) == set()
    wait_until(lambda: _is_watched("w-watched"), timeout=5, every=0.01, what="the watch to wait")
    process.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    process.wait()
    wait_until(lambda: deaths, timeout=5, every=0.005, what="the death to be heard")
    (worker_id, heard), = deaths
    # A granted lock, not a poll: the look at owners comes every 0.5 s, this within milliseconds (on a loaded
    # machine, well under the look's period).
    assert (worker_id, heard - killed < 0.4) == ("w-watched", True)
    assert liveness_owners_dead({"w-watched"}, watch=True) == {"w-watched"}


def test_a_watched_owner_is_known_alive_without_asking_the_database(holder_process, monkeypatch):
    holder_process("w-known")
    assert liveness_owners_dead({"w-known"}, watch=True) == set()
    wait_until(lambda: _is_watched("w-known"), timeout=5, every=0.01, what="the watch to wait")

    def asked(self, worker_ids):
        raise AssertionError(f"asked the database about {worker_ids}")

    monkeypatch.setattr(type(liveness._backend()), "dead", asked)
    assert liveness_owners_dead({"w-known"}, watch=True) == set()


def test_a_watcher_s_lock_is_not_mistaken_for_a_holder(holder_process):
    """A watch is granted its shared lock when the holder dies, and holds it a moment: no one may read that as the
    owner alive."""
    process = holder_process("w-shared-lock")
    process.send_signal(signal.SIGKILL)
    process.wait()
    if connection.vendor == "postgresql":
        watcher = liveness_postgres._connect()
        watcher.execute("SELECT pg_advisory_lock_shared(%s)", [liveness_postgres.liveness_key("w-shared-lock")])
        release = watcher.close
    else:
        fd = os.open(liveness._backend().path("w-shared-lock"), os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_SH)
        release = lambda: os.close(fd)  # noqa: E731
    try:
        wait_until(lambda: liveness_owners_dead({"w-shared-lock"}) == {"w-shared-lock"}, timeout=2, every=0.02,
                   what="the dead owner to be told dead beside the watcher's lock")
    finally:
        release()


def _is_watched(worker_id: str) -> bool:
    watch = liveness._watches.get((liveness._backend(), worker_id))
    return watch is not None and watch.alive


@pytest.mark.skipif(connection.vendor != "sqlite", reason="PostgreSQL leaves nothing behind a dead session")
def test_a_new_holder_removes_the_files_dead_holders_left(holder_process):
    process = holder_process("w-litter")
    process.send_signal(signal.SIGKILL)
    process.wait()
    left = liveness._backend().path("w-litter")
    assert left.exists()
    with liveness_hold("w-sweeper"):
        assert not left.exists()


def _running(run_id: str, owner: str) -> Run:
    """A run claimed by ``owner`` (lease not lapsed), as if its leg were under way."""
    make_queued_run(run_id)
    assert run_claim(worker_id=owner, run_id=run_id)
    return Run.objects.get(run_id=run_id)


def test_a_claim_takes_over_a_run_whose_owner_is_gone():
    _running("dead-owner", "w-gone")  # no process holds w-gone's token
    (claim,) = run_claim(worker_id="w-claimer", take_over_dead=True)
    assert (claim.run_id, claim.epoch, claim.kind) == ("dead-owner", 2, "recovery")
    assert Run.objects.get(run_id="dead-owner").worker_id == "w-claimer"
    assert list(Leg.objects.filter(run__run_id="dead-owner").values_list("kind", flat=True)) == ["start", "recovery"]


def test_a_claim_leaves_a_live_owner_s_run_and_its_own_alone():
    with liveness_hold("w-alive"):
        _running("live-owner", "w-alive")
        _running("own", "w-claimer")  # the claimer's own run, even with no token held: never taken over by it
        assert run_claim(worker_id="w-claimer", take_over_dead=True) == []


def test_without_the_look_at_owners_a_dead_owner_s_run_waits_for_its_lease():
    _running("lease-only", "w-gone")
    assert run_claim(worker_id="w-claimer") == []


def test_a_worker_holds_its_token_while_it_runs_and_gives_it_back_when_it_stops(workers):
    worker = workers("w-life")
    wait_until(lambda: not liveness_owners_dead({"w-life"}), what="the worker to hold its token")
    worker.stop()
    assert liveness_owners_dead({"w-life"}) == {"w-life"}
