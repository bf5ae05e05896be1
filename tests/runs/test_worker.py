"""The worker loop survives what the database throws at it."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.db import OperationalError

from runs import worker as worker_module
from runs.worker import Worker


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
