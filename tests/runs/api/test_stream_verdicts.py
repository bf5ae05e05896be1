"""The stream says who decided: a resumed run's journal has a tool-approval-verdict part before the settled call's
tool-result, for an approval, a denial with its reason, and an expiry (decided by nobody)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import approval_expire_due
from runs.runtime.approvals import DENIED_BY_DEFAULT_REASON
from tests.factories import make_suspended_run, verdict
from tests.streams import follow

pytestmark = pytest.mark.django_db(transaction=True)


def parts_of(user, run_id: str) -> list[dict]:
    return [event["data"] for event in follow(user, run_id) if event["id"] is not None]


def verdict_and_next(parts: list[dict]) -> tuple[dict, dict]:
    """The stream's one verdict part and the part right after it."""
    (index,) = [i for i, part in enumerate(parts) if part["type"] == "tool-approval-verdict"]
    return parts[index], parts[index + 1]


def test_an_approval_is_told_with_the_reviewer_before_the_payment_result(drain_runs, owner, reviewer):
    request = make_suspended_run(drain_runs, "v-ok", user=owner)
    verdict(request, user=reviewer)
    drain_runs()
    told, after = verdict_and_next(parts_of(owner, "v-ok"))
    assert told == {"type": "tool-approval-verdict", "approval_id": request.approval_id,
                    "tool_call_id": request.tool_call_id, "approved": True, "reason": "", "decided_by": "rita",
                    "edited": False}
    assert (after["type"], after["tool_call_id"], after["is_error"]) == ("tool-result", request.tool_call_id, False)


def test_a_denial_is_told_with_its_reason_and_reviewer(drain_runs, owner, reviewer):
    request = make_suspended_run(drain_runs, "v-no", user=owner)
    verdict(request, approved=False, reason="Receipt missing.", user=reviewer)
    drain_runs()
    told, after = verdict_and_next(parts_of(owner, "v-no"))
    assert (told["approved"], told["reason"], told["decided_by"]) == (False, "Receipt missing.", "rita")
    assert (after["type"], after["is_error"]) == ("tool-result", True)


def test_an_expiry_is_told_as_a_denial_decided_by_nobody(drain_runs, owner):
    request = make_suspended_run(drain_runs, "v-late", user=owner)
    ApprovalRequest.objects.filter(pk=request.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    approval_expire_due()
    drain_runs()
    told, _ = verdict_and_next(parts_of(owner, "v-late"))
    assert (told["approved"], told["reason"], told["decided_by"]) == (False, DENIED_BY_DEFAULT_REASON, None)
