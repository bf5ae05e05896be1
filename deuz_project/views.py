"""Project-level pages: the home page, the health probe, and the error answers (JSON under /api/, pages elsewhere)."""

from __future__ import annotations

import logging

from django.db import DatabaseError, connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import csrf, defaults
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from deuz_project.middleware import is_api_path

__all__ = [
    "api_not_found",
    "bad_request",
    "csrf_failure",
    "healthz",
    "home",
    "page_not_found",
    "permission_denied",
    "server_error",
]

logger = logging.getLogger("deuz.health")


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """The landing page: what this is and where to go next (it holds no data)."""
    return render(request, "home.html")


@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """Answer 200 when the database answers a query, 503 otherwise (for load balancers)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError:
        # The probe must answer, not 500: a load balancer reads the status code.
        logger.warning("Health check: database unreachable", exc_info=True)
        return JsonResponse({"status": "unavailable", "database": "unreachable"}, status=503)
    return JsonResponse({"status": "ok"})


# The error handlers (handler400... in urls.py). Under /api/ a client parses JSON, so an unknown path or an
# error outside DRF's own handling still answers {"detail": "..."}; elsewhere Django's handlers render
# templates/4xx.html and 500.html, which say what happened and never show a traceback or the exception's
# details beyond the message a view chose to give (a 404's or 403's).


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """400: a request Django could not accept (a bad Host header, a malformed body...)."""
    if is_api_path(request):
        # The exception's text is not echoed: SuspiciousOperation messages may quote hostile input.
        return JsonResponse({"detail": "Bad request."}, status=400)
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """403: signed in, but not allowed to do this."""
    if is_api_path(request):
        return JsonResponse({"detail": "You do not have permission to perform this action."}, status=403)
    return defaults.permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """404: no route matches, or the view found nothing; under /api/ in JSON rather than Django's HTML page."""
    if is_api_path(request):
        return JsonResponse({"detail": "Not found: no API endpoint or object at this path."}, status=404)
    return defaults.page_not_found(request, exception)


# Exempt: it records nothing, and a signed-in browser's POST to an unknown path is a 404, not a CSRF failure.
@csrf_exempt
def api_not_found(request: HttpRequest, *args: str) -> HttpResponse:
    """The route of every /api/ path no endpoint has: the JSON 404, whatever DEBUG says or the method is."""
    return page_not_found(request, Http404())


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """403 for a form or session POST without its CSRF token (CSRF_FAILURE_VIEW): JSON under /api/, where a view
    outside DRF meets CsrfViewMiddleware; elsewhere Django's view, which renders templates/403_csrf.html."""
    if is_api_path(request):
        return JsonResponse({"detail": f"CSRF Failed: {reason}"}, status=403)
    return csrf.csrf_failure(request, reason)


def server_error(request: HttpRequest) -> HttpResponse:
    """500: a bug; the details go to the log, never to the client."""
    if is_api_path(request):
        return JsonResponse({"detail": "Server error: the failure was logged."}, status=500)
    return defaults.server_error(request)
