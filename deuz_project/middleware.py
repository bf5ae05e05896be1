"""Edge middleware: no stored copies of run data, and no NUL character past the door.

Both sit above sessions, users and views (see MIDDLEWARE in settings), so they apply to every page and
API answer, and a refused request never opens a database connection.
"""

from __future__ import annotations

import re

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve

__all__ = [
    "API_NOT_FOUND",
    "ApiSlashOptionalMiddleware",
    "PrivateNoStoreMiddleware",
    "RefuseNulMiddleware",
    "is_api_path",
    "nul_location",
]

#: The URL name of the route that answers every /api/ path no endpoint has (deuz_project.urls).
API_NOT_FOUND = "api-not-found"

# What a response holding run data may be cached as: nowhere, by no one (browsers' back/forward and disk
# caches, shared proxies). A view that sets Cache-Control itself (never_cache, the SSE stream) keeps its own.
NO_STORE = "private, no-store"

_NUL = "\x00"

# A parameter name worth echoing in an error: short and plain; anything else is described, not repeated.
_PLAIN_NAME = re.compile(r"[\w.\-\[\]]{1,64}")

_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def is_api_path(request: HttpRequest) -> bool:
    """True for the REST API's paths, whose errors are JSON rather than pages."""
    return request.path_info.startswith("/api/")


class _DualMiddleware:
    """A middleware that runs in the caller's mode, so async views (the SSE stream) never hop threads for it."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest):
        if self.is_async:
            return self.__acall__(request)
        response = self.refuse(request)
        return self.respond(request, response if response is not None else self.get_response(request))

    async def __acall__(self, request: HttpRequest):
        response = self.refuse(request)
        return self.respond(request, response if response is not None else await self.get_response(request))

    def refuse(self, request: HttpRequest) -> HttpResponseBase | None:
        """An answer given instead of calling the view, or None to go on."""
        return None

    def respond(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        """The response on its way out."""
        return response


class PrivateNoStoreMiddleware(_DualMiddleware):
    """``Cache-Control: private, no-store`` on every page and API answer that set no caching of its own."""

    def respond(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if "Cache-Control" not in response:
            response["Cache-Control"] = NO_STORE
        return response


def nul_location(request: HttpRequest) -> str | None:
    """Where the request carries a NUL character (the path, a credential header or cookie, a query parameter, a
    page's form field), or None. Credentials count: the token and session lookups would hit the database."""
    if _NUL in request.path:
        return "The path"
    if _NUL in request.headers.get("Authorization", ""):
        return "The Authorization header"
    if any(_NUL in key or _NUL in value for key, value in request.COOKIES.items()):
        return "A cookie"
    for key, values in request.GET.lists():
        if _NUL in key or any(_NUL in value for value in values):
            return _described("query parameter", key)
    if (
        request.method == "POST"
        and not is_api_path(request)  # the API reads JSON bodies only; its parser answers for them
        and request.content_type in _FORM_TYPES
    ):
        for key, values in request.POST.lists():
            if _NUL in key or any(_NUL in value for value in values):
                return _described("form field", key)
    return None


def _described(kind: str, key: str) -> str:
    return f"The {kind} {key!r}" if _PLAIN_NAME.fullmatch(key) else f"A {kind}"


class RefuseNulMiddleware(_DualMiddleware):
    """Answer 400 to a request whose path, query or page form holds NUL, before any view or query sees it.

    PostgreSQL cannot store or even compare text containing NUL (a lookup raises DataError, a 500), and no
    run id, agent name, filter or reason legitimately holds one; refusing at the edge treats both databases
    alike. JSON under /api/, a page elsewhere.
    """

    def refuse(self, request: HttpRequest) -> HttpResponse | None:
        where = nul_location(request)
        if where is None:
            return None
        message = f"{where} contains a NUL character (%00), which no run id, name, filter or text may hold."
        if is_api_path(request):
            return JsonResponse({"detail": message}, status=400)
        return render(request, "400.html", {"reason": message}, status=400)


class ApiSlashOptionalMiddleware(_DualMiddleware):
    """Serve an /api/ path written without its trailing slash as the endpoint with it, for every method.

    Django's APPEND_SLASH would redirect instead: an HTML 301 a client has to follow, and for a POST a
    RuntimeError (a 500 page under DEBUG), since a redirect cannot carry a body (issue 22). The path is rewritten
    before URL resolution, so CommonMiddleware finds it valid and the endpoint sees its canonical path.
    """

    def refuse(self, request: HttpRequest) -> None:
        path = request.path_info
        if (path == "/api" or is_api_path(request)) and not path.endswith("/") and _is_endpoint(request, path + "/"):
            request.path_info = path + "/"
            request.path = request.path + "/"
        return None


def _is_endpoint(request: HttpRequest, path: str) -> bool:
    try:
        match = resolve(path, getattr(request, "urlconf", None))
    except Resolver404:
        return False
    return path == "/api/" or match.url_name != API_NOT_FOUND
