"""The API's one EXCEPTION_HANDLER: domain errors of the runs and approvals services become JSON answers.

  RunNotFound, ApprovalNotFound, ThreadNotFound   404
  RunAlreadyExists                            409, field error on "run_id"
  ThreadAlreadyExists                         409, field error on "thread_id"
  ThreadTurnActive                            409 with "active_run_id"
  ThreadAgentMismatch                         409, field error on "agent"
  UnknownAgent                                400, field error on "agent"
  RunNotResumable, ApprovalNotDecidable       409
  IdempotencyKeyInvalid                       400, field error on "Idempotency-Key" (the header)
  IdempotencyKeyReused                        422
  IdempotencyKeyInFlight                      409
  ApprovalTokenInvalid                        400, field error on "token"
  django ValidationError (a service's full_clean)  400, field errors
  RequestDataTooBig (DATA_UPLOAD_MAX_MEMORY_SIZE)  413
  other unreadable bodies (SuspiciousOperation, MultiPartParserError, BadRequest)  400
  anything DRF knows (APIException, Http404, PermissionDenied): as DRF answers it; field errors
  (a serializer's ValidationError) get a "detail" beside them

Every answer is ``{"detail": "...", ...}``. Anything else returns None, so it stays a 500 as DRF does.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import BadRequest, RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http.multipartparser import MultiPartParserError
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from approvals.errors import ApprovalNotDecidable, ApprovalNotFound, ApprovalTokenInvalid
from runs.agents import agent_names
from runs.errors import (
    IdempotencyKeyInFlight,
    IdempotencyKeyInvalid,
    IdempotencyKeyReused,
    RunAlreadyExists,
    RunNotFound,
    RunNotResumable,
    ThreadAgentMismatch,
    ThreadAlreadyExists,
    ThreadNotFound,
    ThreadTurnActive,
    UnknownAgent,
)

__all__ = ["api_exception_handler"]


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """The JSON answer for ``exc``, or None to let it become a 500."""
    if isinstance(exc, (RunNotFound, ApprovalNotFound, ThreadNotFound)):
        return _error(status.HTTP_404_NOT_FOUND, str(exc))
    if isinstance(exc, UnknownAgent):
        # The name is not echoed: it is client input of any length; the known names are what helps.
        message = f"Unknown agent. Known agents: {', '.join(agent_names())}."
        return _error(status.HTTP_400_BAD_REQUEST, message, agent=[message])
    if isinstance(exc, RunAlreadyExists):
        return _error(status.HTTP_409_CONFLICT, str(exc), run_id=[str(exc)])
    if isinstance(exc, ThreadAlreadyExists):
        return _error(status.HTTP_409_CONFLICT, str(exc), thread_id=[str(exc)])
    if isinstance(exc, ThreadTurnActive):
        return _error(status.HTTP_409_CONFLICT, str(exc), active_run_id=exc.active_run_id)
    if isinstance(exc, ThreadAgentMismatch):
        return _error(status.HTTP_409_CONFLICT, str(exc), agent=[str(exc)])
    if isinstance(exc, (RunNotResumable, IdempotencyKeyInFlight)):
        return _error(status.HTTP_409_CONFLICT, str(exc))
    if isinstance(exc, IdempotencyKeyInvalid):
        return _error(status.HTTP_400_BAD_REQUEST, str(exc), **{"Idempotency-Key": [str(exc)]})
    if isinstance(exc, IdempotencyKeyReused):
        return _error(status.HTTP_422_UNPROCESSABLE_ENTITY, str(exc))
    if isinstance(exc, ApprovalNotDecidable):
        return _error(status.HTTP_409_CONFLICT, str(exc), status=exc.status)
    if isinstance(exc, ApprovalTokenInvalid):
        return _error(status.HTTP_400_BAD_REQUEST, str(exc), token=[str(exc)])
    if isinstance(exc, DjangoValidationError):
        fields = exc.message_dict if hasattr(exc, "error_dict") else {}
        return _error(status.HTTP_400_BAD_REQUEST, "; ".join(exc.messages), **fields)
    if isinstance(exc, (SuspiciousOperation, MultiPartParserError, BadRequest)):
        # Raised while reading the body (e.g. by the CSRF check of a session login): Django would answer 400
        # in HTML; the API answers in JSON, and logs to django.security as Django does.
        request = context.get("request")
        if isinstance(exc, SuspiciousOperation):
            logging.getLogger(f"django.security.{type(exc).__name__}").warning(
                "%s: %s", exc, getattr(request, "path", "?")
            )
        if isinstance(exc, RequestDataTooBig):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            return _error(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, f"The request body is larger than {limit} bytes.")
        return _error(status.HTTP_400_BAD_REQUEST, f"The request body could not be read: {exc}")
    response = drf_exception_handler(exc, context)
    if isinstance(exc, ValidationError) and response is not None and isinstance(response.data, dict):
        # Field errors get a message too, so every error answer has "detail".
        response.data = {"detail": "Invalid input; see the field errors.", **response.data}
    return response


def _error(code: int, detail: str, **extra: Any) -> Response:
    return Response({"detail": detail, **extra}, status=code)
