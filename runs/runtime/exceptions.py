"""Errors raised by the pure runtime.

RunError
  CheckpointNotFoundError
  StoreUnavailableError
  CheckpointCorruptError
  OwnershipLostError
  RunHalted
    EffectNeedsReview
    EffectsStopped
    EffectHeldElsewhere
    EffectStateChanged
  EffectConflictError
  EffectNotAuthorized
  ScriptExhaustedError
  ModelCallError
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterable, Mapping
from typing import Any

from .redact import redact

__all__ = [
    "CheckpointCorruptError",
    "CheckpointNotFoundError",
    "EffectConflictError",
    "EffectHeldElsewhere",
    "EffectNeedsReview",
    "EffectNotAuthorized",
    "EffectStateChanged",
    "EffectsStopped",
    "ModelCallError",
    "OwnershipLostError",
    "RunError",
    "RunHalted",
    "ScriptExhaustedError",
    "StoreUnavailableError",
    "classify_model_error",
]


class RunError(Exception):
    """Base for everything runs.runtime raises."""


class CheckpointNotFoundError(RunError):
    """The store answered, and it holds no checkpoint for this run."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"No checkpoint stored for run {run_id!r}.")
        self.run_id = run_id


class StoreUnavailableError(RunError):
    """The store could not be asked; distinct from a missing run, so a run is never restarted from scratch."""

    def __init__(self, run_id: str, cause: BaseException) -> None:
        super().__init__(f"The session store could not load run {run_id!r}: {type(cause).__name__}.")
        self.run_id = run_id


class CheckpointCorruptError(RunError):
    """Stored bytes failed to decode or carry an unknown schema version; never silently restart."""


class OwnershipLostError(RunError):
    """A store rejected a write because another worker owns the run now; the leg must stop at once."""


class RunHalted(RunError):
    """A tool stops the leg for people to look (an effect whose outcome cannot be established); not an
    ordinary tool error the model could react to. The last checkpoint stays, so the run can resume later."""


class EffectNeedsReview(RunHalted):
    """An effect's outcome cannot be established (or did not verify): the run stops for a person to resolve it,
    rather than gambling on a second attempt. ``operation_id`` and ``opened_by`` name the operation when it is
    another run's (a business operation both reached): this run waits for that person's resolution too."""

    def __init__(self, message: str, *, operation_id: str | None = None, opened_by: str | None = None) -> None:
        super().__init__(message)
        self.operation_id = operation_id
        self.opened_by = opened_by


class EffectHeldElsewhere(RunHalted):
    """Another run opened this business operation and has not settled it yet (proposed, approved, attempted or
    unknown): this run never attempts it, it waits, and is queued again when the operation settles."""

    def __init__(self, operation_id: str, opened_by: str) -> None:
        super().__init__(f"Operation {operation_id} is being performed by run {opened_by}; this run waits until it "
                         "settles.")
        self.operation_id = operation_id
        self.opened_by = opened_by


class EffectsStopped(RunHalted):
    """A stop switch is on: no new effect is attempted, and the run suspends until it is released."""

    def __init__(self, reason: str = "effects are stopped") -> None:
        super().__init__(reason)
        self.reason = reason


class EffectStateChanged(RunHalted):
    """A ledger entry is not in the state its writer read (another writer moved it); nothing is guessed."""


class EffectConflictError(RunError):
    """An operation id was recorded for another request (another fingerprint); the tool is not called. A
    visible failure (an ``is_error`` result and a ledger event), never a silent change of meaning."""


class EffectNotAuthorized(RunError):
    """An approval-gated effect has no approval bound to its exact request (denied, expired, used, or given for
    other arguments); the tool is not called and the model reads why."""


class ScriptExhaustedError(RunError):
    """A ScriptedModel was called more times than it has responses."""


class ModelCallError(RunError):
    """A model call failed, classified so a worker can tell a retry from a dead end.

    ``is_transient`` is true for rate limits, overloads, other 5xx answers, timeouts, dropped connections and
    streams cut mid-step (a later leg may succeed); false for authentication, permission and bad-request
    errors (retrying cannot help). ``retry_after_ms`` is the provider's own ``retry-after-ms`` /
    ``retry-after`` hint when it sent one. ``reason`` is one word of why: ``rate-limit``, ``overloaded``,
    ``server``, ``timeout``, ``connection``, ``stream-cut``, ``auth``, ``bad-request`` or ``other``.
    ``error_name`` is the class name of the provider's error (``RateLimitError``, ...), also ``__cause__``.
    ``usage`` is what the leg had consumed, failed step included as far as it was reported.
    """

    def __init__(
        self,
        message: str,
        *,
        error_name: str,
        is_transient: bool,
        reason: str = "other",
        status_code: int | None = None,
        retry_after_ms: int | None = None,
    ) -> None:
        super().__init__(f"{error_name}: {message}" if message else error_name)
        self.message = message
        self.error_name = error_name
        self.is_transient = is_transient
        self.reason = reason
        self.status_code = status_code
        self.retry_after_ms = retry_after_ms
        self.usage: Mapping[str, Any] | None = None


# Error types in the providers' bodies (Anthropic ``error.type``, OpenAI ``error.type`` / ``error.code``).
_TRANSIENT_BODY_TYPES = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate-limit",
    "rate_limit_exceeded": "rate-limit",
    "api_error": "server",
    "server_error": "server",
    "timeout_error": "timeout",
    "service_unavailable": "overloaded",
}
_PERMANENT_BODY_TYPES = {
    "authentication_error": "auth",
    "invalid_api_key": "auth",
    "permission_error": "auth",
    "invalid_request_error": "bad-request",
    "not_found_error": "bad-request",
    "request_too_large": "bad-request",
    "billing_error": "auth",
}
# Class names of transport failures (httpx2, httpx, httpcore, aiohttp, the standard library), matched by name
# so the pure runtime imports no HTTP library.
_TIMEOUT_NAMES = {"APITimeoutError", "TimeoutException", "ReadTimeout", "ConnectTimeout", "WriteTimeout", "PoolTimeout", "TimeoutError"}
_CONNECTION_NAMES = {
    "APIConnectionError",
    "TransportError",
    "NetworkError",
    "ReadError",
    "WriteError",
    "ConnectError",
    "CloseError",
    "RemoteProtocolError",
    "ProtocolError",
    "IncompleteRead",
    "ConnectionError",
}


def classify_model_error(exc: BaseException, *, secrets: Iterable[str] = ()) -> ModelCallError:
    """The ModelCallError for whatever a model's ``stream`` raised; the message is redacted of secrets."""
    if isinstance(exc, ModelCallError):
        return exc
    name = type(exc).__name__
    message = redact(str(getattr(exc, "message", None) or exc or ""), secrets)
    status_code = getattr(exc, "status_code", None)
    status_code = status_code if isinstance(status_code, int) else None
    headers = getattr(getattr(exc, "response", None), "headers", None)
    retry_after_ms = _retry_after_ms(headers)
    is_transient, reason = _classify(exc, status_code, _body_type(getattr(exc, "body", None)))
    should_retry = _header(headers, "x-should-retry")
    if should_retry in ("true", "false"):  # the provider says so explicitly; the SDKs obey it too
        is_transient = should_retry == "true"
    return ModelCallError(
        message,
        error_name=name,
        is_transient=is_transient,
        reason=reason,
        status_code=status_code if status_code and status_code >= 400 else None,
        retry_after_ms=retry_after_ms,
    )


def _classify(exc: BaseException, status_code: int | None, body_type: str | None) -> tuple[bool, str]:
    names = {klass.__name__ for klass in type(exc).__mro__}
    if getattr(exc, "is_stream_cut", False):  # set by the providers on a response that broke off mid-stream
        return True, "stream-cut"
    if status_code is not None and status_code >= 400:
        if status_code in (401, 403):
            return False, "auth"
        if status_code == 429:
            return True, "rate-limit"
        if status_code in (503, 529):
            return True, "overloaded"
        if status_code in (408, 504):
            return True, "timeout"
        if status_code == 409:  # a lock timeout; the SDKs retry it as well
            return True, "server"
        if status_code >= 500:
            return True, "server"
        return False, "bad-request"
    # No HTTP error status: an error event inside a 200 stream, or no answer at all.
    if body_type in _TRANSIENT_BODY_TYPES:
        return True, _TRANSIENT_BODY_TYPES[body_type]
    if body_type in _PERMANENT_BODY_TYPES:
        return False, _PERMANENT_BODY_TYPES[body_type]
    if names & _TIMEOUT_NAMES or isinstance(exc, TimeoutError):
        return True, "timeout"
    if names & _CONNECTION_NAMES or isinstance(exc, (ConnectionError, EOFError)):
        return True, "connection"
    if body_type is not None or names & {"APIError", "APIStatusError"}:
        # The provider answered with an error mid-stream whose type says nothing more: its failure, not ours.
        return True, "server"
    return False, "other"


def _body_type(body: Any) -> str | None:
    """The error's code or type in an API error body, Anthropic's and OpenAI's shapes both."""
    if not isinstance(body, Mapping):
        return None
    error = body["error"] if isinstance(body.get("error"), Mapping) else body
    found = [value for value in (error.get("code"), error.get("type")) if isinstance(value, str) and value not in ("", "error")]
    for value in found:
        if value in _TRANSIENT_BODY_TYPES or value in _PERMANENT_BODY_TYPES:
            return value
    return found[0] if found else None


def _header(headers: Any, name: str) -> str | None:
    if headers is None:
        return None
    try:
        value = headers.get(name)
    except Exception:  # not a mapping after all
        return None
    return value.strip().lower() if isinstance(value, str) else None


def _retry_after_ms(headers: Any) -> int | None:
    """The wait a provider asked for: ``retry-after-ms``, else ``retry-after`` in seconds or as an HTTP date."""
    value = _header(headers, "retry-after-ms")
    if value:
        try:
            return max(0, round(float(value)))
        except ValueError:
            pass
    value = _header(headers, "retry-after")
    if not value:
        return None
    try:
        return max(0, round(float(value) * 1000))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0, round((email.utils.mktime_tz(parsed) - time.time()) * 1000))
