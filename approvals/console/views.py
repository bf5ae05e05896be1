"""The reviewers' console: the queue of approval requests and one request's page with Approve / Deny."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.timesince import timesince
from django.views.decorators.http import require_http_methods, require_safe

from approvals.access import DECIDE_APPROVALS
from approvals.errors import ApprovalNotDecidable, ApprovalNotFound, ApprovalTokenInvalid
from approvals.models import ApprovalRequest
from approvals.selectors import approval_get, approval_queue_list, approval_recent_list, approval_state
from approvals.services import approval_decide
from runs.presenters.state import run_people_state
from runs.presenters.timeline import run_step_list

__all__ = ["approval_detail", "approval_queue"]

RECENT_LIMIT = 20
REASON_MAX_LENGTH = 2000


def reviewer_required(view):
    """Logged in (else to the admin login), and allowed to decide approval requests (else 403)."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs):
        if not request.user.has_perm(DECIDE_APPROVALS):
            raise PermissionDenied("Only reviewers may use the console.")
        return view(request, *args, **kwargs)

    return wrapped


@dataclass(frozen=True)
class ReviewItem:
    """An approval request as the console shows it: its state as of now, its input as formatted JSON."""

    request: ApprovalRequest
    state: str  # pending | approved | denied | expired | superseded | used
    state_label: str
    input_json: str
    token_hint: str
    age: str

    @property
    def is_decidable(self) -> bool:
        return self.state == ApprovalRequest.Status.PENDING


def _review_item(request: ApprovalRequest, now: datetime) -> ReviewItem:
    state = approval_state(request, now=now)
    return ReviewItem(
        request=request,
        state=state,
        state_label=ApprovalRequest.Status(state).label,
        input_json=json.dumps(request.tool_input, ensure_ascii=False, indent=2, sort_keys=True),
        # The token is a bearer credential: pages show a prefix to tell tokens apart, never the whole.
        token_hint=f"{request.token[:12]}…" if request.token else "",
        age=timesince(request.issued_at, now),
    )


@reviewer_required
@require_safe
def approval_queue(request: HttpRequest) -> HttpResponse:
    """Pending requests newest first, then the recently decided, expired, superseded and used ones."""
    now = timezone.now()
    pending = [_review_item(row, now) for row in approval_queue_list(now=now)]
    recent = [_review_item(row, now) for row in approval_recent_list(now=now, limit=RECENT_LIMIT)]
    return render(request, "approvals/queue.html", {"pending": pending, "recent": recent, "now": now})


@reviewer_required
@require_http_methods(["GET", "HEAD", "POST"])
def approval_detail(request: HttpRequest, run_id: str, approval_id: str) -> HttpResponse:
    """One request with its run's recent timeline; POST records the reviewer's verdict with the stored token."""
    try:
        row = approval_get(run_id=run_id, approval_id=approval_id)
    except ApprovalNotFound:
        raise Http404(f"Run {run_id!r} has no approval request {approval_id!r}.") from None
    error, status = "", 200
    if request.method == "POST":
        verdict = request.POST.get("verdict")
        if verdict not in {"approve", "deny"}:
            error, status = "Choose Approve or Deny.", 400
        else:
            approved = verdict == "approve"
            reason = request.POST.get("reason", "").strip()[:REASON_MAX_LENGTH]
            try:
                # The browser never holds the token: the verdict is bound to the one stored with the request.
                approval_decide(run_id=run_id, approval_id=approval_id, approved=approved, token=row.token,
                                reason=reason, user=request.user)
            except ApprovalNotDecidable as exc:
                error, status = str(exc), 409
            except (ApprovalTokenInvalid, ApprovalNotFound) as exc:  # the stored token no longer verifies
                error, status = str(exc), 409
            else:
                done = "approved" if approved else "denied"
                messages.success(request, f"{row.tool_name} in run {run_id} {done}.")
                return redirect("console:queue")
            row.refresh_from_db()
    item = _review_item(row, timezone.now())
    context = {
        "item": item,
        "run": row.run,
        "state": run_people_state(row.run),
        "steps": run_step_list(run=row.run)[-10:],
        "error": error,
    }
    return render(request, "approvals/detail.html", context, status=status)
