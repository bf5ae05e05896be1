"""The demo agents run end to end through the in-process worker."""

from __future__ import annotations

import pytest

from tests.factories import make_paid_run


@pytest.mark.django_db(transaction=True)
def test_the_reimbursement_agent_suspends_then_pays_after_approval(drain_runs):
    run = make_paid_run(drain_runs, "r1")  # fails at its suspension if no approval is pending
    assert (run.status, run.effects.get().status) == ("completed", "verified")
