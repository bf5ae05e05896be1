"""The reviewers' console: the queue of approval requests and one request's page with what a reviewer needs to
decide (who asked and for what, the evidence so far, the exact input, time left), Approve / Deny with a
confirmation step, and an honest answer when someone decided first."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from datetime import datetime
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.timesince import timesince, timeuntil
from django.views.decorators.http import require_http_methods, require_safe

from approvals.console.forms import QueueFilterForm
from approvals.roles import REVIEWERS_GROUP, approval_is_decidable_by, approval_refusal
from approvals.errors import ApprovalNotDecidable, ApprovalNotFound, ApprovalTokenInvalid
from approvals.models import ApprovalRequest
from approvals.selectors import (
    OperationContext,
    approval_edit_problem,
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
    def input_text(self) -> str:
        """The input as the "Edit and approve" box starts it: indented JSON."""
        return json.dumps(self.input, ensure_ascii=False, indent=2, sort_keys=True)

    @property
    def edited_input(self) -> Any:
        try:
            return self.request.edited_input
        except SealedDataError:
            return None

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


def _consequence(item: ReviewItem, *, approved: bool, reason: str, others_pending: int, edited: bool = False) -> str:
    """What recording this verdict will make happen, in a sentence or two (the confirmation step shows it)."""
    request = item.request
    where = f" inside the sub-agent {' › '.join(request.agent_path)}" if request.agent_path else ""
    if edited:
        text = (f"Run {request.run.run_id} resumes from its last checkpoint and calls {request.tool_name}{where} "
                "once, with your edited input below instead of the one the agent asked for. The server signs the "
                "edited request in your name; the agent, the timeline and the receipt show both inputs and that "
                "you made the edit.")
    elif approved:
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


@dataclass
class _Posted:
    """What a POST to the decide page came to: an error with its status, a confirmation step, or done."""

    error: str = ""
    status: int = 200
    confirming: dict[str, Any] | None = None
    edit_error: str = ""  # the "Edit and approve" form's own error, shown beside its box
    done: bool = False


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _edited_input(text: str, row: ApprovalRequest) -> tuple[dict[str, Any] | None, str]:
    """The "Edit and approve" box read as JSON and checked against the tool's schema: (input, "") or (None, why)."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        return None, f"The edited input is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
    except (ValueError, RecursionError):  # NaN or Infinity, a number of over 4300 digits, nesting past the stack
        return None, ("The edited input is not JSON this server accepts: no NaN or Infinity, numbers of at most "
                      "4300 digits, at most 32 levels of nesting.")
    problem = approval_edit_problem(row, value)
    return (None, problem) if problem is not None else (value, "")


def _verdict_post(request: HttpRequest, row: ApprovalRequest, item: ReviewItem) -> _Posted:
    """Read a verdict: ask for confirmation first, then record it with the stored token (the browser never holds
    it), or say why nothing was recorded."""
    verdict = request.POST.get("verdict")
    reason = request.POST.get("reason", "").strip()[:REASON_MAX_LENGTH]
    edited = None
    if verdict not in {"approve", "deny", "edit"}:
        return _Posted(error="Choose Approve, Edit and approve, or Deny.", status=400)
    if item.is_decidable and verdict == "edit":
        edited, problem = _edited_input(request.POST.get("edited_input", ""), row)
        if edited is None:
            return _Posted(error=problem, edit_error=problem, status=400)
    if item.is_decidable and verdict == "deny" and not reason:
        return _Posted(error="Give a reason for denying: the agent reads it, and so does whoever started the run.",
                       status=400)
    if item.is_decidable and request.POST.get("confirm") != "yes":
        others = len([other for other in approval_pending_list(run=row.run)
                      if other.revision_id == row.revision_id and other.pk != row.pk])
        consequence = _consequence(item, approved=verdict != "deny", reason=reason, others_pending=others,
                                   edited=edited is not None)
        return _Posted(confirming={"verdict": verdict, "reason": reason, "consequence": consequence,
                                   "edited_input": edited,
                                   "edited_text": json.dumps(edited, ensure_ascii=False) if edited is not None else ""})
    approved = verdict != "deny"
    try:
        approval_decide(run_id=row.run.run_id, approval_id=row.approval_id, approved=approved, token=row.token,
                        reason=reason, user=request.user, edited_input=edited)
    except (ApprovalNotDecidable, ApprovalTokenInvalid, ApprovalNotFound):
        row = approval_get(run_id=row.run.run_id, approval_id=row.approval_id)
        return _Posted(error=_closed_answer(row, _review_item(row, timezone.now()), approved=approved), status=409)
    except ValidationError as exc:  # the tool's schema changed since the box was checked
        return _Posted(error=" ".join(exc.messages), edit_error=" ".join(exc.messages), status=400)
    except PermissionDenied as exc:
        return _Posted(error=str(exc), status=403)
    done = "approved with your edit" if edited is not None else ("approved" if approved else "denied")
    messages.success(request, f"{row.tool_name} in run {row.run.run_id} {done}.")
    return _Posted(done=True)


@reviewer_required
@require_http_methods(["GET", "HEAD", "POST"])
def approval_detail(request: HttpRequest, run_id: str, approval_id: str) -> HttpResponse:
    """One request with what a reviewer needs to decide. POST ``verdict`` (approve, deny with a ``reason``, or edit
    with ``edited_input``, JSON) shows what will happen; POST again with ``confirm=yes`` records it. The run's own
    creator is told why they may not decide it (four eyes) and offered no verdict; a forged POST gets 403."""
    try:
        row = approval_get(run_id=run_id, approval_id=approval_id)
    except ApprovalNotFound:
        raise Http404(f"Run {run_id!r} has no approval request {approval_id!r}.") from None
    item = _review_item(row, timezone.now())
    refusal = approval_refusal(user=request.user, run=row.run)
    posted = _Posted()
    if request.method == "POST":
        posted = _Posted(error=refusal, status=403) if refusal is not None else _verdict_post(request, row, item)
        if posted.done:
            return redirect("console:queue")
        if posted.status == 409:
            row = approval_get(run_id=run_id, approval_id=approval_id)
            item = _review_item(row, timezone.now())
    context: dict[str, Any] = {
        "item": item,
        "run": row.run,
        "refusal": refusal,
        "state": run_people_state(row.run),
        "evidence": _evidence_before(row),
        "steps": run_step_list(run=row.run)[-10:],
        "error": posted.error,
        "edit_error": posted.edit_error,
        "confirming": posted.confirming,
        "posted_reason": request.POST.get("reason", "") if request.method == "POST" else "",
        "posted_edit": request.POST.get("edited_input") if request.method == "POST" else None,
    }
    return render(request, "approvals/detail.html", context, status=posted.status)
