"""Server-rendered pages about runs: the list, one run's timeline, the live transcript, and cancelling.

Who sees what is runs.access: support staff and reviewers read every run, everyone else their own; a run the
user may not read answers 404, so run ids cannot be probed.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from runs.access import run_is_cancellable_by, run_is_readable_by, runs_readable_by
from runs.errors import RunNotFound, RunNotResumable
from runs.pages.forms import RunFilterForm
from runs.models import Run
from runs.presenters.outcome import RUN_LIST_PREFETCH, run_first_request, run_list_outcome
from runs.presenters.timeline import run_page_get, run_verdict_list
from runs.selectors import run_get, run_list
from runs.services.lifecycle import run_cancel

__all__ = ["run_cancel_page", "run_detail", "run_list_page", "run_live"]

RUNS_PER_PAGE = 50


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
@require_safe
def run_detail(request: HttpRequest, run_id: str) -> HttpResponse:
    """The run's timeline: its state box, outcome, semantic steps, story, legs, effects, technical records."""
    page = run_page_get(run=_readable_run(request, run_id))
    return render(request, "runs/detail.html", {
        "page": page, "run": page.run, "state": page.state, "steps": page.steps,
        "may_cancel": not page.run.is_terminal and run_is_cancellable_by(page.run, user=request.user),
    })


@login_required
@require_POST
def run_cancel_page(request: HttpRequest, run_id: str) -> HttpResponse:
    """Cancel the run (its creator, or whoever may cancel every run); back to its page with what happened."""
    run = _readable_run(request, run_id)
    if not run_is_cancellable_by(run, user=request.user):
        raise PermissionDenied("Only the run's creator, or an operator allowed to cancel every run, may cancel it.")
    try:
        run_cancel(run_id=run.run_id, user=request.user)
    except RunNotResumable as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Run {run.run_id} cancelled: no new model calls, no new effects.")
    return redirect("run-detail", run.run_id)


@login_required
@require_safe
def run_live(request: HttpRequest, run_id: str) -> HttpResponse:
    """The run's transcript, streamed by runs/static/runs/deuz-stream.js (SSE, or ``?transport=websocket``), with
    each verdict from the run's approval requests."""
    run = _readable_run(request, run_id)
    transport = "websocket" if request.GET.get("transport") == "websocket" else "sse"
    return render(request, "runs/live.html", {"run": run, "transport": transport,
                                              "verdicts": run_verdict_list(run=run)})
