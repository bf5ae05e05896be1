"""Server-rendered pages about runs: the list, one run's timeline, the live transcript."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from runs.access import VIEW_EVERY_RUN
from runs.errors import RunNotFound
from runs.models import Run
from runs.presenters.state import run_people_state
from runs.presenters.timeline import run_page_get
from runs.selectors import run_get, run_list

__all__ = ["run_detail", "run_list_page", "run_live"]

RUNS_PER_PAGE = 50


def support_required(view):
    """Logged in (else to the admin login), and staff or a reviewer (else 403): run pages show tool inputs."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs):
        user = request.user
        if not (user.is_staff or user.has_perm(VIEW_EVERY_RUN)):
            raise PermissionDenied("Only support staff may see runs.")
        return view(request, *args, **kwargs)

    return wrapped


@support_required
@require_safe
def run_list_page(request: HttpRequest) -> HttpResponse:
    """Runs newest first, filtered by status, 50 a page, each with its people-facing state."""
    status = request.GET.get("status") or None
    if status not in Run.Status.values:
        status = None
    runs = run_list(status=status).prefetch_related("legs", "effects")
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    rows = [
        (run, run_people_state(run, legs=list(run.legs.all()), effects=list(run.effects.all()),
                               include_last_event=False))
        for run in page.object_list
    ]
    return render(request, "runs/list.html", {
        "page": page, "rows": rows, "status": status, "statuses": Run.Status.choices,
    })


@support_required
@require_safe
def run_detail(request: HttpRequest, run_id: str) -> HttpResponse:
    """The run's timeline: its state box, semantic steps, legs, effects, and technical records on demand."""
    try:
        page = run_page_get(run_id=run_id)
    except RunNotFound:
        raise Http404(f"No run {run_id!r}.") from None
    return render(request, "runs/detail.html", {"page": page, "run": page.run, "state": page.state,
                                                "steps": page.steps})


@login_required
@require_safe
def run_live(request: HttpRequest, run_id: str) -> HttpResponse:
    """The run's transcript, streamed by runs/static/runs/deuz-stream.js (SSE, or ``?transport=websocket``)."""
    try:
        run = run_get(run_id=run_id)
    except RunNotFound:
        raise Http404(f"No run {run_id!r}.") from None
    transport = "websocket" if request.GET.get("transport") == "websocket" else "sse"
    return render(request, "runs/live.html", {"run": run, "transport": transport})
