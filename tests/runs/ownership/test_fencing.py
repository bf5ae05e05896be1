"""Owner-epoch fencing (runs.ownership.fencing): a claim's fences know the run's key without looking it up, and a
key remembered for a run id that now names another row never lets a fence write to a row that is not its run's."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

import runs.ownership.fencing
from runs.errors import StaleOwnerError
from runs.models import Run
from runs.ownership.fencing import OwnerFence, fence_run_pk_claimed
from runs.services.lifecycle import run_claim
from tests.factories import make_queued_run, make_run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def nothing_remembered(monkeypatch):
    """No key remembered from an earlier test's runs (their ids and keys repeat from one test to the next)."""
    monkeypatch.setattr(runs.ownership.fencing, "_claimed_pks", {})


def test_a_fence_of_a_claimed_leg_holds_in_one_statement():
    make_queued_run("r1")
    (claim,) = run_claim(worker_id="w1", run_id="r1")
    fence = OwnerFence("r1", claim.epoch)
    with CaptureQueriesContext(connection) as queries:
        pk = fence.hold()
    assert pk == Run.objects.get(run_id="r1").pk
    assert [query["sql"].split()[0] for query in queries] == ["UPDATE"]  # no SELECT of the run's key first


def test_a_fence_nobody_claimed_looks_its_key_up():
    run = make_run("r1", owner_epoch=3)
    fence = OwnerFence("r1", 3)
    with CaptureQueriesContext(connection) as queries:
        assert fence.hold() == run.pk
    assert [query["sql"].split()[0] for query in queries] == ["SELECT", "UPDATE"]


def test_a_remembered_key_that_is_now_another_runs_never_writes_to_it():
    other = make_run("r2", owner_epoch=1)
    fence_run_pk_claimed("r1", 1, other.pk)  # r1 once had r2's key (deleted, its key reused), then came back
    mine = make_run("r1", owner_epoch=1)
    untouched = Run.objects.filter(pk=other.pk).values("step_index", "updated_at").get()

    assert OwnerFence("r1", 1).hold(step_index=7) == mine.pk
    assert Run.objects.get(pk=mine.pk).step_index == 7
    assert Run.objects.filter(pk=other.pk).values("step_index", "updated_at").get() == untouched


def test_a_stale_epoch_is_refused_whatever_key_was_remembered():
    run = make_run("r1", owner_epoch=2)
    fence_run_pk_claimed("r1", 1, run.pk)
    with pytest.raises(StaleOwnerError):
        OwnerFence("r1", 1).hold()


def test_a_write_inside_a_held_fence_uses_the_holders_key_never_a_remembered_one():
    other = make_run("r2", owner_epoch=1)
    fence_run_pk_claimed("r1", 1, other.pk)  # a key remembered for r1 that is now r2's
    mine = make_run("r1", owner_epoch=1)
    holder = OwnerFence("r1", 1)
    with transaction.atomic():
        assert holder.hold() == mine.pk  # the remembered key matched no row: looked up
        fence_run_pk_claimed("r1", 1, other.pk)  # and remembered wrong again meanwhile (another thread's claim)
        with holder.nested():
            assert OwnerFence("r1", 1).hold() == mine.pk  # a save hook's journal flush: the holder's key
