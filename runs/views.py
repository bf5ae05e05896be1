"""Server-rendered pages about runs: the live transcript."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from runs.errors import RunNotFound
from runs.selectors import run_get

__all__ = ["run_live"]


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
