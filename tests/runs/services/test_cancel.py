"""run_cancel and a leg's close: whatever way a cancelled run ends, its journal ends with the cancelled part and a
cancelled finish; a running leg is told at once in this process."""

from __future__ import annotations

import asyncio

import pytest
from django.core.exceptions import ValidationError

from runs.models import JournalEntry, Run
from runs.ownership.wakeups import run_cancel_watch
from runs.services.lifecycle import run_cancel, run_claim, run_leg_finish
from tests.factories import make_queued_run, make_user

pytestmark = pytest.mark.django_db(transaction=True)


def journal(run_id: str) -> list[dict]:
    rows = JournalEntry.objects.filter(run__run_id=run_id, is_sentinel=False).order_by("seq")
    return [row.decoded_part for row in rows]


def _running(run_id: str):
    make_queued_run(run_id)
    (claim,) = run_claim(worker_id="w", run_id=run_id)
    return claim


@pytest.mark.parametrize("finish_reason", ["suspended", "aborted", "effects-stopped"])
def test_a_leg_that_ends_otherwise_while_the_cancel_was_on_its_way_ends_the_journal_with_the_cancel(finish_reason):
    claim = _running("r1")
    run_cancel(run_id="r1", user=make_user("olga"), reason="Stop.")
    run = run_leg_finish(run_id="r1", epoch=claim.epoch, leg=claim.leg, finish_reason=finish_reason, usage={})
    parts = journal("r1")
    assert (run.status, run.finish_reason) == ("cancelled", "cancelled")
    assert parts[-2:] == [{"type": "cancelled", "by": "olga", "reason": "Stop."},
                          {"type": "finish", "finish_reason": "cancelled", "usage": parts[-1]["usage"]}]
    assert JournalEntry.objects.filter(run__run_id="r1").order_by("-id").first().is_sentinel


def test_a_leg_the_runtime_stopped_for_the_cancel_is_not_told_twice():
    claim = _running("r1")
    run_cancel(run_id="r1")
    run = run_leg_finish(run_id="r1", epoch=claim.epoch, leg=claim.leg, finish_reason="cancelled", usage={})
    assert (run.status, journal("r1")) == ("cancelled", [])  # the runtime's own parts are the leg's to write


def test_a_running_run_is_only_flagged_and_its_journal_left_to_its_leg():
    _running("r1")
    run = run_cancel(run_id="r1", reason="Later.")
    assert (run.status, run.cancel_requested, journal("r1")) == ("running", True, [])


def test_the_leg_of_a_running_run_in_this_process_is_told_on_commit():
    _running("r1")

    async def watch_and_cancel() -> bool:
        heard = asyncio.Event()
        unregister = run_cancel_watch("r1", heard)
        from asgiref.sync import sync_to_async

        await sync_to_async(run_cancel)(run_id="r1")
        try:
            await asyncio.wait_for(heard.wait(), 10)  # a guard against a hang, not a timing
        finally:
            unregister()
        return heard.is_set()

    from asgiref.sync import async_to_sync

    assert async_to_sync(watch_and_cancel)() is True


def test_a_reason_longer_than_the_field_is_refused_and_cancels_nothing():
    make_queued_run("r1")
    with pytest.raises(ValidationError):
        run_cancel(run_id="r1", reason="x" * 2001)
    assert Run.objects.get(run_id="r1").status == "queued"
