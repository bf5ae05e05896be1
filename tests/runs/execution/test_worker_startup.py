"""A worker pays its first-use costs at start-up, not inside its first claim and leg: a worker restarted after a
crash takes over its dead peer's run as fast as one that has run a leg before (issue 25)."""

from __future__ import annotations

import pytest

from runs.models import Leg
from runs.ownership.liveness import liveness_owners_dead
from tests.factories import make_queued_run
from tests.processes import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def _imports(output: str) -> list[str]:
    """The modules a process started with PYTHONPROFILEIMPORTTIME imported, as its output names them."""
    return [line.rsplit("|", 1)[1].strip() for line in output.splitlines() if line.startswith("import time:")
            and not line.endswith("imported package")]


def test_a_fresh_workers_first_claim_and_leg_import_no_module(workers):
    worker = workers("a", PYTHONPROFILEIMPORTTIME="1")
    wait_until(lambda: not liveness_owners_dead({"a"}), what="the worker to hold its liveness token")
    started = len(worker.output)
    assert _imports(worker.output), "the worker's output names no import: the test would prove nothing"
    make_queued_run("first-leg-1")
    wait_until(lambda: Leg.objects.filter(run__run_id="first-leg-1", ended_at__isnull=False).exists(),
               what="the run's first leg to end")
    # The channel layer's back end (channels_redis and redis: 60-120 ms) came inside the first claim before.
    assert _imports(worker.output[started:]) == []
    worker.stop()
