"""The worker loop survives what the database throws at it."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.db import OperationalError

from runs.execution import worker as worker_module
from runs.execution.worker import Worker
from runs.stores.sessions import DatabaseSessionStore
from tests.factories import make_queued_run


@pytest.mark.django_db(transaction=True)
def test_a_failed_claim_does_not_end_the_worker(monkeypatch):
    worker = Worker(worker_id="w", concurrency=1, poll_seconds=0.01)
    attempts = []

    def flaky_claim(**kwargs):
        attempts.append(kwargs)
        if len(attempts) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        worker.stop()
        return []

    monkeypatch.setattr(worker_module, "run_claim", flaky_claim)
    async_to_sync(worker.run)()
    assert len(attempts) == 2


class UnreachableSessions:
    """A session store whose database is gone."""

    def fenced(self, run_id, epoch, **kwargs):
        return self

    async def aload(self, run_id):
        from runs.runtime.durable import StoreUnavailableError

        raise StoreUnavailableError(run_id, ConnectionError("connection refused"))


@pytest.mark.django_db(transaction=True)
def test_a_leg_that_loses_its_store_puts_the_run_back_in_the_queue(settings, drain_runs):
    from runs.models import Run

    settings.DEUZ_STORES = {**settings.DEUZ_STORES, "sessions": {"BACKEND": "tests.runs.execution.test_worker.UnreachableSessions"}}
    make_queued_run("lost-store")
    drain_runs(max_legs=1)
    run = Run.objects.get(run_id="lost-store")
    assert (run.status, run.finish_reason) == ("queued", "aborted") and "StoreUnavailableError" in run.error


class SuspensionRefusingSessions(DatabaseSessionStore):
    """The database store, except that it cannot store a suspension (as PostgreSQL once refused a NUL)."""

    def save_sync(self, checkpoint):
        if checkpoint["status"] == "suspended":
            raise ValueError("cannot store this text")
        return super().save_sync(checkpoint)


@pytest.mark.django_db(transaction=True)
def test_a_suspension_that_could_not_be_stored_needs_review_instead_of_waiting(settings, drain_runs):
    from runs.execution.legs import SUSPENSION_NOT_STORED
    from runs.models import Run

    settings.DEUZ_STORES = {**settings.DEUZ_STORES,
                            "sessions": {"BACKEND": "tests.runs.execution.test_worker.SuspensionRefusingSessions"}}
    make_queued_run("unstored")
    drain_runs(max_legs=1)
    run = Run.objects.get(run_id="unstored")
    assert (run.status, run.error) == ("needs_review", SUSPENSION_NOT_STORED)
