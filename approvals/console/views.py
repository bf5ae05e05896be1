"""The reviewers' console: the queue of approval requests and one request's page with what a reviewer needs to
decide (who asked and for what, the evidence so far, the exact input, time left), Approve / Deny with a
confirmation step, and an honest answer when someone decided first."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from datetime import datetime
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.timesince import timesince, timeuntil
from django.views.decorators.http import require_http_methods, require_safe

from approvals.console.forms import QueueFilterForm
from approvals.roles import REVIEWERS_GROUP, approval_is_decidable_by
from approvals.errors import ApprovalNotDecidable, ApprovalNotFound, ApprovalTokenInvalid
from approvals.models import ApprovalRequest
from approvals.selectors import (
    OperationContext,
    approval_get,
    approval_operation,
    approval_pending_list,
    approval_queue_list,
    approval_queue_tool_names,
    approval_recent_list,
    approval_state,
)
from approvals.services import approval_decide
from runs.errors import SealedDataError
from runs.presenters.outcome import run_first_request
from runs.presenters.state import run_people_state
from runs.presenters.timeline import run_evidence_list, run_step_list, verdict_label
from runs.selectors import run_checkpoint_rows

__all__ = ["approval_detail", "approval_queue"]

RECENT_LIMIT = 20
QUEUE_PAGE_SIZE = 25
REASON_MAX_LENGTH = 2000


def reviewer_required(view):
    """Signed in (else to the sign-in page), and allowed to decide approval requests (else a 403 that says why)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs):
        user = request.user
        if not user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not approval_is_decidable_by(user=user):
            raise PermissionDenied(
                f"The console is for reviewers: deciding approval requests needs the {REVIEWERS_GROUP} group (the "
                f"permission approvals.decide_approvalrequest), and {user.get_username()} does not have it. "
                "Support staff read runs and their timelines at /runs/."
            )
        return view(request, *args, **kwargs)

    return wrapped


@dataclass(frozen=True)
class ReviewItem:
    """An approval request as the console shows it: its state as of now, in words, with its run's asker."""

    request: ApprovalRequest
    state: str  # pending | approved | denied | expired | superseded | used | cancelled
    label: str  # "Approved by rita", "Waiting for a verdict"...
    age: str
    time_left: str

    @property
    def started_by(self) -> str:
        run = self.request.run
        return run.created_by.get_username() if run.created_by else "an API client without an account"

    @property
    def request_text(self) -> str:
        """The first user message of the run: what whoever started it asked for."""
        return run_first_request(self.request.run)

    @property
    def input(self) -> Any:
        """The exact input, or None when it is sealed with a key this server does not have (the page says so)."""
        try:
            return self.request.tool_input
        except SealedDataError:
            return None

    @cached_property
    def operation(self) -> OperationContext | None:
        """The business operation the call would perform, when another run performed it or asks for it too."""
        return approval_operation(self.request)

    @property
    def is_decidable(self) -> bool:
        return self.state == ApprovalRequest.Status.PENDING and not self.request.run.cancel_requested


def _review_item(request: ApprovalRequest, now: datetime) -> ReviewItem:
    state = approval_state(request, now=now)
    label = "Expired without a verdict" if state == ApprovalRequest.Status.EXPIRED else verdict_label(request)
    return ReviewItem(
        request=request,
        state=state,
        label=label,
        age=timesince(request.issued_at, now),
        time_left=timeuntil(request.expires_at, now) if state == ApprovalRequest.Status.PENDING else "",
    )


@reviewer_required
@require_safe
def approval_queue(request: HttpRequest) -> HttpResponse:
    """Pending requests newest first, filtered by agent, tool, age and expiring soon (GET), 25 a page; then the
    recently closed ones, each saying who closed it and how. A filter that does not parse is said (400)."""
    now = timezone.now()
    form = QueueFilterForm(request.GET)
    context: dict[str, Any] = {"form": form, "now": now, "tools": approval_queue_tool_names(now=now), "page": None,
                               "pending": [], "recent": [_review_item(row, now) for row in
                                                          approval_recent_list(now=now, limit=RECENT_LIMIT)]}
    if not form.is_valid():
        return render(request, "approvals/queue.html", context, status=400)
    page = Paginator(approval_queue_list(now=now, **form.selection()), QUEUE_PAGE_SIZE).get_page(
        request.GET.get("page"))
    context.update(
        page=page, pending=[_review_item(row, now) for row in page.object_list], is_filtered=form.is_filtered,
        previous_query=form.query_string(page=page.previous_page_number()) if page.has_previous() else "",
        next_query=form.query_string(page=page.next_page_number()) if page.has_next() else "",
    )
    return render(request, "approvals/queue.html", context)


def _consequence(item: ReviewItem, *, approved: bool, reason: str, others_pending: int) -> str:
    """What recording this verdict will make happen, in a sentence or two (the confirmation step shows it)."""
    request = item.request
    where = f" inside the sub-agent {' › '.join(request.agent_path)}" if request.agent_path else ""
    if approved:
        text = (f"Run {request.run.run_id} resumes from its last checkpoint and calls {request.tool_name}{where} "
                "once, with exactly the input shown. A side effect is recorded in the effect ledger before the "
                "call, so it happens at most once.")
    else:
        text = (f"{request.tool_name} is not called. Run {request.run.run_id} resumes and the agent{where} is told "
                f"the call was denied, with your reason: “{reason}”.")
    if others_pending:
        text += (f" The run waits for {others_pending} other request{'s' if others_pending != 1 else ''} of the "
                 "same step before it resumes.")
    return text


def _closed_answer(row: ApprovalRequest, item: ReviewItem, *, approved: bool) -> str:
    """Why a verdict was not recorded: what became of the request first, by whom and when."""
    mine = f"your {'approval' if approved else 'denial'} was not recorded"
    Status = ApprovalRequest.Status
    if item.state == Status.EXPIRED:
        return f"This request expired before it was decided, so it authorizes nothing; {mine}."
    if item.state == Status.CANCELLED or row.run.cancel_requested:
        who = row.run.cancelled_by.get_username() if row.run.cancelled_by else "an operator"
        return f"The run was cancelled by {who}, so its requests cannot be decided; {mine}."
    if item.state == Status.SUPERSEDED:
        return f"A newer request of the run replaced this one; {mine}. Decide the newer one in the queue."
    when = f" at {timezone.localtime(row.decided_at):%Y-%m-%d %H:%M:%S} UTC" if row.decided_at else ""
    reason = f" (reason: {row.reason})" if row.reason else ""
    return f"{item.label}{when}{reason}. It was decided before yours, so {mine}."


def _evidence_before(row: ApprovalRequest) -> list[Any]:
    """The tool results the run had when it asked (its checkpoints up to the one that asked), so a decided
    request's page does not count the call's own result, or anything after it, as evidence for the verdict."""
    rows = list(run_checkpoint_rows(run=row.run))
    if row.revision_id is not None:
        rows = [checkpoint for checkpoint in rows if checkpoint.pk <= row.revision_id]
    return run_evidence_list(run=row.run, rows=rows)


@reviewer_required
@require_http_methods(["GET", "HEAD", "POST"])
def approval_detail(request: HttpRequest, run_id: str, approval_id: str) -> HttpResponse:
    """One request with what a reviewer needs to decide. POST ``verdict`` (and a ``reason``, required to deny)
    shows what will happen; POST again with ``confirm=yes`` records it with the stored token."""
    try:
        row = approval_get(run_id=run_id, approval_id=approval_id)
    except ApprovalNotFound:
        raise Http404(f"Run {run_id!r} has no approval request {approval_id!r}.") from None
    error, status, confirming = "", 200, None
    item = _review_item(row, timezone.now())
    if request.method == "POST":
        verdict = request.POST.get("verdict")
        reason = request.POST.get("reason", "").strip()[:REASON_MAX_LENGTH]
        if verdict not in {"approve", "deny"}:
            error, status = "Choose Approve or Deny.", 400
        elif item.is_decidable and verdict == "deny" and not reason:
            error, status = "Give a reason for denying: the agent reads it, and so does whoever started the run.", 400
        elif item.is_decidable and request.POST.get("confirm") != "yes":
            others = len([other for other in approval_pending_list(run=row.run)
                          if other.revision_id == row.revision_id and other.pk != row.pk])
            confirming = {"verdict": verdict, "reason": reason,
                          "consequence": _consequence(item, approved=verdict == "approve", reason=reason,
                                                      others_pending=others)}
        else:  # confirmed, or already closed: the service has the last word (and records an expiry it finds)
            approved = verdict == "approve"
            try:
                # The browser never holds the token: the verdict is bound to the one stored with the request.
                approval_decide(run_id=run_id, approval_id=approval_id, approved=approved, token=row.token,
                                reason=reason, user=request.user)
            except (ApprovalNotDecidable, ApprovalTokenInvalid, ApprovalNotFound):
                row = approval_get(run_id=run_id, approval_id=approval_id)
                item = _review_item(row, timezone.now())
                error, status = _closed_answer(row, item, approved=approved), 409
            else:
                done = "approved" if approved else "denied"
                messages.success(request, f"{row.tool_name} in run {run_id} {done}.")
                return redirect("console:queue")
    context: dict[str, Any] = {
        "item": item,
        "run": row.run,
        "state": run_people_state(row.run),
        "evidence": _evidence_before(row),
        "steps": run_step_list(run=row.run)[-10:],
        "error": error,
        "confirming": confirming,
        "posted_reason": request.POST.get("reason", "") if request.method == "POST" else "",
    }
    return render(request, "approvals/detail.html", context, status=status)
