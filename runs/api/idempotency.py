"""The ``Idempotency-Key`` header of the API's POSTs: read it, answer through runs.services.idempotency, and the
header's description for the OpenAPI document. Any POST view can use it (threads and chat later)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request
from rest_framework.response import Response

from runs.api.schema import error_answer
from runs.services.idempotency import IDEMPOTENCY_TTL, MAX_KEY_CHARS, IdempotentAnswer, idempotent_answer

__all__ = [
    "IDEMPOTENCY_KEY",
    "IDEMPOTENCY_KEY_IN_FLIGHT",
    "IDEMPOTENCY_KEY_REUSED",
    "IDEMPOTENT_REPLAYED",
    "idempotent_response",
]

HEADER = "Idempotency-Key"
#: Set on an answer replayed from a key's first request.
REPLAYED_HEADER = "Idempotent-Replayed"
_HOURS = int(IDEMPOTENCY_TTL.total_seconds() // 3600)

IDEMPOTENCY_KEY = OpenApiParameter(
    HEADER,
    {"type": "string", "minLength": 1, "maxLength": MAX_KEY_CHARS, "pattern": "^[!-~]+$"},
    OpenApiParameter.HEADER,
    description=f"Your unique key for this request (a UUID, say): the same key and body from you within {_HOURS} "
    "hours replays the first answer (status and body, with `Idempotent-Replayed: true`); the same key with another "
    "body answers 422; a repeat while the first is still being answered, 409. An answer that was an error is not "
    f"kept: the request may be repeated with its key. 1-{MAX_KEY_CHARS} visible ASCII characters, else 400.",
)
IDEMPOTENT_REPLAYED = OpenApiParameter(
    REPLAYED_HEADER,
    str,
    OpenApiParameter.HEADER,
    response=True,
    enum=["true"],
    description="Present when the answer is the stored first answer to this Idempotency-Key.",
)
IDEMPOTENCY_KEY_REUSED = error_answer("The Idempotency-Key was sent before with another body.")
#: What an endpoint's 409 adds when it takes Idempotency-Key.
IDEMPOTENCY_KEY_IN_FLIGHT = "the first request with this Idempotency-Key is still being answered"


def idempotent_response(
    request: Request, *, scope: str, answer: Callable[[], IdempotentAnswer], body: Any = None,
) -> Response:
    """``answer()`` as a Response, once per Idempotency-Key when the request has one (every time otherwise).
    ``body`` is what makes two requests the same, when more than the request's body does (a path's id)."""
    key = request.headers.get(HEADER)
    if key is None:
        given = answer()
    else:
        given = idempotent_answer(user=request.user, key=key, scope=scope,
                                  body=request.data if body is None else body, answer=answer)
    response = Response(given.body, status=given.status)
    if given.is_replay:
        response[REPLAYED_HEADER] = "true"
    return response
