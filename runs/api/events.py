"""`GET /api/runs/{run_id}/events/`: the resumable stream as Server-Sent Events (an async view under daphne).

The follower core (runs.wire.followers) decides everything; this view authenticates with Django REST framework's
own classes (``REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]``: a token or the session) and writes frames.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

from django.db import DataError
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.settings import api_settings

from runs.execution.continuation import run_continue
from runs.wire.followers import Follow, FollowRefused, FollowResponse, FrameKind, follow_open, parse_cursor

__all__ = ["run_events"]

_KEEPALIVE_EVERY = 15  # idle ticks of a second
_DONE = "data: [DONE]\n\n"
# The reconnection delay (ms) an EventSource takes, then a comment: a plain EventSource that loses the stream (or
# reads a finished run's [DONE] and is closed by the server) reconnects after a second with its Last-Event-ID.
_RETRY_MS = 1000
_OPENED = f"retry: {_RETRY_MS}\n: following\n\n"


def _authenticator(request: HttpRequest):
    """The blocking authentication the core runs: DRF's, exactly as the REST API authenticates."""

    def authenticate():
        drf_request = Request(request, authenticators=[cls() for cls in api_settings.DEFAULT_AUTHENTICATION_CLASSES])
        try:
            return drf_request.user
        except exceptions.APIException as exc:  # a token that does not verify, an inactive user
            raise FollowRefused(401, str(exc.detail)) from None
        except DataError:  # a token or session key the database cannot even compare (a NUL on PostgreSQL)
            raise FollowRefused(401, "Invalid credentials.") from None

    return authenticate


def _is_cursor(raw: str) -> bool:
    try:
        parse_cursor(raw)
    except FollowRefused:
        return False
    return True


def _www_authenticate(request: HttpRequest) -> str | None:
    """The header DRF sends with a 401: its first authentication class's (``Token``)."""
    for cls in api_settings.DEFAULT_AUTHENTICATION_CLASSES:
        return cls().authenticate_header(request)
    return None


@csrf_exempt  # it changes nothing, and answers every other method with a JSON 405 rather than a CSRF page
async def run_events(request: HttpRequest, run_id: str):
    """Replay from the cursor (``Last-Event-ID`` or ``?cursor=``), tail the live run, continue a dead one."""
    if request.method != "GET":
        return JsonResponse({"detail": f'Method "{request.method[:20]}" not allowed.'}, status=405,  # DRF's words
                            headers={"Allow": "GET"})
    query = request.GET.get("cursor")
    raw_cursor = request.headers.get("Last-Event-ID") or query
    if query and raw_cursor != query and not _is_cursor(query):
        raw_cursor = query  # a malformed ?cursor= is refused (400) even beside a Last-Event-ID header, never ignored
    try:
        follow = await follow_open(run_id=run_id, cursor=raw_cursor, authenticate=_authenticator(request), kind="sse",
                                   continuation=run_continue)
    except FollowRefused as refusal:
        response = JsonResponse({"detail": refusal.detail}, status=refusal.status)
        if refusal.status == 401 and (challenge := _www_authenticate(request)):
            response["WWW-Authenticate"] = challenge
        return response
    response = FollowResponse(follow, _events(follow))
    response["Cache-Control"] = "private, no-store"  # run data: never kept by a cache or a proxy
    response["X-Accel-Buffering"] = "no"  # proxies must not hold parts back
    return response


def _event(data: str, seq: int | None = None) -> str:
    """An event of a part's JSON text (runs.wire.followers.part_json)."""
    return (f"id: {seq}\n" if seq is not None else "") + f"data: {data}\n\n"


async def _events(follow: Follow) -> AsyncIterator[str]:
    # At once: daphne sends the status line with the first bytes of the body, and a client (fetch, EventSource)
    # waits for it; a queued run's first part may be long in coming.
    yield _OPENED
    idle = 0
    async with aclosing(follow.batches()) as batches:
        async for batch in batches:
            events = []  # what is known at once goes in one write: a leg's last parts and [DONE], a replayed page
            for frame in batch:
                if frame.kind is FrameKind.PART:
                    events.append(_event(frame.json, frame.seq))  # a live part's text is shared: no encode each
                elif frame.kind is FrameKind.IDLE:
                    idle += 1
                    if idle % _KEEPALIVE_EVERY == 0:
                        events.append(": keep-alive\n\n")
                elif frame.kind is FrameKind.DONE:
                    events.append(_DONE)
                else:  # FAILED: an error part without an id; [DONE] too unless the client's reconnect may succeed
                    events.append(_event(frame.json))
                    if frame.is_final:
                        events.append(_DONE)
            if events:
                yield "".join(events)
