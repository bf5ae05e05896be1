"""`GET /api/runs/{run_id}/events/`: the resumable stream as Server-Sent Events (an async view under daphne)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

from django.conf import settings
from django.http import JsonResponse, StreamingHttpResponse

from runs.followers import RunFollower, authenticate_token, follower_id
from runs.runtime.codec import encode_value
from runs.runtime.loops import error_part
from runs.runtime.wire import DONE, IDLE, follow_journal

__all__ = ["run_events"]

logger = logging.getLogger("deuz.followers")

_KEEPALIVE_EVERY = 15  # idle ticks of a second


def _cursor(request) -> int | None:
    raw = request.headers.get("Last-Event-ID") or request.GET.get("cursor")
    if raw is None or raw == "":
        return -1
    try:
        cursor = int(raw)
    except ValueError:
        return None
    return cursor if cursor >= -1 else None


def _event(part: dict, seq: int | None = None) -> str:
    data = json.dumps(encode_value(part), ensure_ascii=False, separators=(",", ":"))
    return (f"id: {seq}\n" if seq is not None else "") + f"data: {data}\n\n"


async def run_events(request, run_id: str):
    """Replay from the cursor (``Last-Event-ID`` or ``?cursor=``), tail the live run, continue a dead one."""
    user = await request.auser()
    if not user.is_authenticated:
        user = await authenticate_token(request.headers.get("Authorization"))
    if user is None or not user.is_authenticated:
        return JsonResponse({"detail": "Authentication credentials were not provided."}, status=401)
    cursor = _cursor(request)
    if cursor is None:
        return JsonResponse({"detail": "The cursor must be a whole number of at least -1."}, status=400)
    response = StreamingHttpResponse(_stream(run_id, cursor), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # proxies must not hold parts back
    return response


async def _stream(run_id: str, cursor: int) -> AsyncIterator[str]:
    secrets = (settings.DEUZ_APPROVAL_SECRET, settings.SECRET_KEY)
    try:
        async with RunFollower(run_id, follower_id=follower_id("sse")) as follower:
            if not await follower.exists():
                yield _event({"type": "error", "error": {"name": "RunNotFound", "message": f"No run {run_id!r}."}})
                yield "data: [DONE]\n\n"
                return
            idle = 0
            async for item in follow_journal(read=follower.read, state=follower.state, wait=follower.wait,
                                             continue_run=follower.continue_run, cursor=cursor, yield_idle=True):
                if item == DONE:
                    yield "data: [DONE]\n\n"
                    return
                if item == IDLE:
                    idle += 1
                    if idle % _KEEPALIVE_EVERY == 0:
                        yield ": keep-alive\n\n"
                    continue
                seq, part = item
                yield _event(part, seq)
    except Exception as exc:  # a store failure: a redacted error part, and no [DONE], so the client retries
        logger.exception("Following run %s failed.", run_id)
        yield _event(error_part(exc, secrets))
