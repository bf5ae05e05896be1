"""The EffectLedger contract, run over both ledgers: the in-memory reference and the database one (fenced)."""

from __future__ import annotations

import pytest

from runs.runtime.durable import EffectLedger, InMemoryEffectLedger, OwnershipLostError
from runs.runtime.exceptions import EffectStateChanged

pytestmark = pytest.mark.django_db(transaction=True)

PROPOSAL = {"operation_id": "r1:call-1", "run_id": "r1", "tool_call_id": "call-1", "tool_name": "pay",
            "fingerprint": "a" * 64, "input": {"amount": "84.20"}}


class MemoryLedgers:
    def __init__(self) -> None:
        self.ledger = InMemoryEffectLedger()

    def owned(self):
        """A ledger fenced to the run's current owner, and a function that hands the run to a new owner."""
        return self.ledger.fenced("r1", self.ledger.claim("r1")), lambda: self.ledger.claim("r1")


class DatabaseLedgers:
    def __init__(self) -> None:
        from tests.factories import make_run

        self.run = make_run("r1", owner_epoch=1, worker_id="w-1")

    def owned(self):
        from runs.stores import get_store
        from runs.models import Run

        def take_over() -> None:
            Run.objects.filter(pk=self.run.pk).update(owner_epoch=self.run.owner_epoch + 1)

        return get_store("effects").fenced("r1", 1, agent="reimbursement", worker_id="w-1"), take_over


@pytest.fixture(params=["memory", "database"])
def ledgers(request):
    return MemoryLedgers() if request.param == "memory" else DatabaseLedgers()


def test_both_ledgers_implement_the_protocol(ledgers):
    ledger, _ = ledgers.owned()
    assert isinstance(ledger, EffectLedger)


def test_open_creates_a_proposed_entry_once_and_then_returns_the_stored_one(ledgers):
    ledger, _ = ledgers.owned()
    first = ledger.open(PROPOSAL)
    again = ledger.open({**PROPOSAL, "fingerprint": "b" * 64})
    assert (first["status"], again["fingerprint"]) == ("proposed", "a" * 64)


def test_get_answers_none_for_an_unknown_operation(ledgers):
    ledger, _ = ledgers.owned()
    assert ledger.get("r1:nope") is None


def test_advance_moves_the_entry_and_keeps_its_changes(ledgers):
    ledger, _ = ledgers.owned()
    ledger.open(PROPOSAL)
    ledger.advance("r1:call-1", expected="proposed", status="attempted", via="tool", changes={"attempts": 1})
    ledger.advance("r1:call-1", expected="attempted", status="committed", via="tool",
                   changes={"output": {"transaction_id": "tx-1"}, "outcome_source": "tool"})
    entry = ledger.get("r1:call-1")
    assert (entry["status"], entry["attempts"], entry["output"], entry["epoch"]) == (
        "committed", 1, {"transaction_id": "tx-1"}, 1)


def test_advance_from_a_state_the_entry_is_not_in_is_refused(ledgers):
    ledger, _ = ledgers.owned()
    ledger.open(PROPOSAL)
    with pytest.raises(EffectStateChanged):
        ledger.advance("r1:call-1", expected="attempted", status="committed", via="tool")


def test_a_move_the_state_machine_does_not_allow_is_refused(ledgers):
    ledger, _ = ledgers.owned()
    ledger.open(PROPOSAL)
    with pytest.raises(ValueError, match="cannot go from proposed to verified"):
        ledger.advance("r1:call-1", expected="proposed", status="verified", via="verify")


def test_a_stale_owner_cannot_write(ledgers):
    ledger, take_over = ledgers.owned()
    ledger.open(PROPOSAL)
    take_over()
    with pytest.raises(OwnershipLostError):
        ledger.advance("r1:call-1", expected="proposed", status="attempted", via="tool")


def test_every_move_is_recorded_with_epoch_and_actor():
    from runs.models import EffectTransition

    ledgers = DatabaseLedgers()
    ledger, _ = ledgers.owned()
    ledger.open(PROPOSAL)
    ledger.advance("r1:call-1", expected="proposed", status="attempted", via="tool", note="Attempt 1.")
    rows = list(EffectTransition.objects.values_list("from_status", "to_status", "owner_epoch", "actor_kind",
                                                     "actor", "via"))
    assert rows == [("", "proposed", 1, "worker", "w-1", "tool"), ("proposed", "attempted", 1, "worker", "w-1",
                                                                   "tool")]
