"""Server-rendered pages about runs: the list, one run's timeline, the live transcript, cancelling, and a
reviewer's controls for an effect that needs review (retry it, mark it committed with a receipt, or abandon it,
from a plain form in templates/runs/_effect_resolve.html).

Who sees what is runs.access: support staff and reviewers read every run, everyone else their own; a run the
user may not read answers 404, so run ids cannot be probed.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views import defaults
from django.views.decorators.http import require_POST, require_safe

from approvals.models import ApprovalRequest
from approvals.roles import approval_is_decidable_by
from approvals.selectors import approval_pending_list
from runs.access import (
    effect_is_resolvable_by,
    run_is_cancellable_by,
    run_is_forkable_by,
    run_is_readable_by,
    runs_readable_by,
)
from runs.errors import CheckpointNotFound, EffectNotFound, RunNotFound, RunNotResumable
from runs.pages.forms import RunCancelForm, RunFilterForm
from runs.models import Run
from runs.presenters.outcome import RUN_LIST_PREFETCH, run_first_request, run_list_outcome
from runs.presenters.timeline import run_page_get, run_verdict_list
from runs.selectors import run_get, run_list, thread_turn_list
from runs.services.fork import run_fork
from runs.services.lifecycle import run_cancel
from runs.services.resolution import effect_resolve

__all__ = ["effect_resolve_submit", "run_cancel_page", "run_detail", "run_fork_page", "run_list_page", "run_live"]

RUNS_PER_PAGE = 50


def _not_found_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Answer the site's own 404 page (templates/404.html) for a run the user may not read, even with DEBUG on,
    where Django would show its technical page listing every URL pattern (issue 24)."""

    @functools.wraps(view)
    def answer(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except Http404 as exc:
            return defaults.page_not_found(request, exc)

    return answer


def _decidable_requests(run: Run, user: Any) -> list[ApprovalRequest]:
    """The requests ``run`` waits on that ``user`` may decide in the console (its "Decide this request" links)."""
    if not approval_is_decidable_by(user=user) or not approval_is_decidable_by(user=user, run=run):
        return []
    return approval_pending_list(run=run)


def _readable_run(request: HttpRequest, run_id: str) -> Run:
    """The run, when the user may read it; 404 otherwise, the same answer as for a run that does not exist."""
    try:
        run = run_get(run_id=run_id)
    except RunNotFound:
        raise Http404(f"No run {run_id!r}.") from None
    if not run_is_readable_by(run, user=request.user):
        raise Http404(f"No run {run_id!r}.")
    return run


@login_required
@require_safe
def run_list_page(request: HttpRequest) -> HttpResponse:
    """The runs the user may read, newest first, searched and filtered, 50 a page, each with its state and
    outcome; a filter that does not parse is said (400) rather than ignored."""
    form = RunFilterForm(request.GET)
    if not form.is_valid():
        return render(request, "runs/list.html", {"form": form, "rows": [], "page": None}, status=400)
    runs = form.filter(runs_readable_by(run_list(), user=request.user))
    runs = runs.select_related("created_by", "cancelled_by").prefetch_related(*RUN_LIST_PREFETCH)
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    rows = []
    for run in page.object_list:
        state, outcome = run_list_outcome(run)
        rows.append({"run": run, "state": state, "request": run_first_request(run), "outcome": outcome})
    return render(request, "runs/list.html", {
        "form": form, "page": page, "rows": rows, "is_filtered": any(form.cleaned_data.values()),
        "previous_query": form.query_string(page=page.previous_page_number()) if page.has_previous() else "",
        "next_query": form.query_string(page=page.next_page_number()) if page.has_next() else "",
    })


@login_required
@_not_found_page
@require_safe
def run_detail(request: HttpRequest, run_id: str) -> HttpResponse:
    """The run's timeline: its state box, outcome, semantic steps, story, legs, effects, technical records."""
    page = run_page_get(run=_readable_run(request, run_id))
    thread = page.run.thread
    return render(request, "runs/detail.html", {
        "page": page, "run": page.run, "state": page.state, "steps": page.steps,
        # A thread's turns share its creator, so whoever reads this turn reads the others.
        "thread_turns": [] if thread is None else list(thread_turn_list(thread=thread)),
        "may_cancel": not page.run.is_terminal and run_is_cancellable_by(page.run, user=request.user),
        "may_fork": run_is_forkable_by(page.run, user=request.user),
        "decide_requests": _decidable_requests(page.run, request.user),
    })


@login_required
@_not_found_page
@require_POST
def run_cancel_page(request: HttpRequest, run_id: str) -> HttpResponse:
    """Cancel the run (its creator, or whoever may cancel every run) in two steps, as a verdict is given: a POST
    shows what cancelling does and asks to confirm; a POST with ``confirm=yes`` cancels it, back to its page with
    what happened."""
    run = _readable_run(request, run_id)
    if not run_is_cancellable_by(run, user=request.user):
        raise PermissionDenied("Only the run's creator, or an operator allowed to cancel every run, may cancel it.")
    form = RunCancelForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(form.errors["reason"]))
        return redirect("run-detail", run.run_id)
    if request.POST.get("confirm") != "yes" and not run.is_terminal:
        return render(request, "runs/cancel_confirm.html", {
            "run": run, "reason": form.cleaned_data["reason"], "pending": approval_pending_list(run=run)})
    try:
        run_cancel(run_id=run.run_id, user=request.user, reason=form.cleaned_data["reason"])
    except RunNotResumable as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Run {run.run_id} cancelled: no new model calls, no new effects.")
    return redirect("run-detail", run.run_id)


@login_required
@_not_found_page
@require_POST
def run_fork_page(request: HttpRequest, run_id: str, step_index: int) -> HttpResponse:
    """Fork a new run from the run's checkpoint of ``step_index`` (support and reviewers); on to the new run's
    page, which links back to this one."""
    run = _readable_run(request, run_id)
    if not run_is_forkable_by(run, user=request.user):
        raise PermissionDenied("Forking a run needs the support or reviewers role.")
    try:
        fork = run_fork(run_id=run.run_id, step_index=step_index, user=request.user)
    except CheckpointNotFound:
        raise Http404(f"Run {run.run_id!r} has no checkpoint of step {step_index}.") from None
    messages.success(request, f"Run {fork.run_id} forked from step {step_index} of run {run.run_id}: it is queued "
                              "and runs like any run.")
    return redirect("run-detail", fork.run_id)


@login_required
@_not_found_page
@require_safe
def run_live(request: HttpRequest, run_id: str) -> HttpResponse:
    """The run's transcript, streamed by runs/static/runs/deuz-stream.js (SSE, or ``?transport=websocket``), with
    each verdict from the run's approval requests."""
    run = _readable_run(request, run_id)
    transport = "websocket" if request.GET.get("transport") == "websocket" else "sse"
    return render(request, "runs/live.html", {"run": run, "transport": transport,
                                              "verdicts": run_verdict_list(run=run),
                                              "decide_requests": _decidable_requests(run, request.user)})


@login_required
@_not_found_page
@require_POST
def effect_resolve_submit(request: HttpRequest, run_id: str, operation_id: str) -> HttpResponse:
    """Resolve one effect as the signed-in reviewer; any refusal is shown on the run's page, never a 500."""
    if not effect_is_resolvable_by(user=request.user):
        raise PermissionDenied("Resolving effects needs the reviewer permission.")
    receipt, text = None, request.POST.get("receipt", "").strip()
    try:
        if text:
            try:
                receipt = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValidationError({"receipt": [f"The receipt is not JSON: {exc.msg}."]}) from None
        effect = effect_resolve(run_id=run_id, operation_id=operation_id, action=request.POST.get("action", ""),
                                reason=request.POST.get("reason", ""), receipt=receipt, user=request.user)
    except EffectNotFound:
        raise Http404("No such effect.") from None
    except RunNotFound:
        raise Http404("No such run.") from None
    except (ValidationError, RunNotResumable) as exc:
        messages.error(request, "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc))
    else:
        messages.success(request, f"{effect.tool_name} {effect.operation_id}: resolved, now "
                                  f"{effect.get_status_display().lower()}.")
    return redirect("run-detail", run_id=run_id)
