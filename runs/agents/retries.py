"""The retry policy of legs: what a run does when its model call fails after the SDK's own quick retries.

A transient failure (rate limit, overload, 5xx, timeout, dropped connection, stream cut) puts the run back in
the queue with a ``retry_at`` (exponential backoff with jitter, the provider's ``retry-after`` honoured), and a
later leg resumes it from its last checkpoint, so no finished step is repeated. Past the policy's attempts, and
at once for authentication and bad-request errors, the run fails with the reason. The leg (runs.execution.legs) plans the
retry; run_leg_finish (runs.services.lifecycle) records it on the run.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from runs.runtime.exceptions import ModelCallError
from runs.runtime.redact import redact

__all__ = [
    "RETRY_PART_TYPE",
    "RetryPlan",
    "RetryPolicy",
    "model_error_failure",
    "model_error_summary",
    "retry_plan",
    "retry_policy_default",
]

#: The journal part a leg writes last (before its sentinel) when it scheduled a retry.
RETRY_PART_TYPE = "retry"

# Doubling stops here: 2**40 base periods is far past any sane max_seconds, and the float never overflows.
_MAX_DOUBLINGS = 40

_TRANSIENT_WHY = {
    "rate-limit": "The provider's rate limit was hit",
    "overloaded": "The provider is overloaded",
    "server": "The provider failed with a server error",
    "timeout": "The model request timed out",
    "connection": "The connection to the provider failed",
    "stream-cut": "The model's stream broke off mid-step",
}


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How a run is retried after transient model errors: at most ``attempts`` retries in a row, the first after
    about ``base_seconds``, each next one twice as long, none longer than ``max_seconds``."""

    attempts: int = 5
    base_seconds: float = 2.0
    max_seconds: float = 300.0

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 0:
            raise ValueError(f"RetryPolicy.attempts must be a whole number of at least 0; got {self.attempts!r}.")
        for name in ("base_seconds", "max_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
                raise ValueError(f"RetryPolicy.{name} must be a finite number of seconds of at least 0; got {value!r}.")
        if self.max_seconds < self.base_seconds:
            raise ValueError(
                f"RetryPolicy.max_seconds ({self.max_seconds:g}) must be at least base_seconds ({self.base_seconds:g})."
            )

    def delay_seconds(
        self, attempt: int, *, retry_after_ms: int | None = None, random: Callable[[], float] = _random.random
    ) -> float:
        """The wait before retry ``attempt`` (1 for the first): ``base_seconds * 2**(attempt - 1)``, jittered to
        between half and all of it, at least the provider's ``retry_after_ms``, at most ``max_seconds``."""
        backoff = min(self.max_seconds, self.base_seconds * 2 ** min(max(attempt - 1, 0), _MAX_DOUBLINGS))
        delay = backoff * (0.5 + 0.5 * random())
        if retry_after_ms:
            delay = max(delay, retry_after_ms / 1000)
        return min(delay, self.max_seconds)


def retry_policy_default() -> RetryPolicy:
    """The policy of agents that set none: DEUZ_MODEL_RETRY_ATTEMPTS, _BASE_SECONDS and _MAX_SECONDS, read now
    (so a test's or an operator's settings apply to the next leg)."""
    from django.conf import settings

    return RetryPolicy(
        attempts=settings.DEUZ_MODEL_RETRY_ATTEMPTS,
        base_seconds=settings.DEUZ_MODEL_RETRY_BASE_SECONDS,
        max_seconds=settings.DEUZ_MODEL_RETRY_MAX_SECONDS,
    )


@dataclass(frozen=True, kw_only=True)
class RetryPlan:
    """A retry a leg scheduled: which one, of how many, when, and why (redacted, ready for people)."""

    attempt: int
    limit: int
    retry_at: datetime
    delay_seconds: float
    reason: str  # ModelCallError.reason: rate-limit, overloaded, server, timeout, connection, stream-cut
    summary: str  # model_error_summary of the error

    @property
    def description(self) -> str:
        """What the run's error and state say while it waits: "Retry scheduled at ..., attempt k of n: why"."""
        when = self.retry_at.astimezone(UTC)
        return (
            f"Retry scheduled at {when:%Y-%m-%d %H:%M:%S} UTC, attempt {self.attempt} of {self.limit}: {self.summary}"
        )

    def part(self) -> dict[str, Any]:
        """The ``retry`` journal part: times in milliseconds since the epoch, like the runtime's."""
        return {
            "type": RETRY_PART_TYPE,
            "attempt": self.attempt,
            "max_attempts": self.limit,
            "retry_at": round(self.retry_at.timestamp() * 1000),
            "delay_ms": round(self.delay_seconds * 1000),
            "reason": self.reason,
            "message": self.description,
        }


def model_error_summary(error: ModelCallError, *, secrets: Iterable[str] = ()) -> str:
    """One sentence on why a model call failed, with the provider's error, for the run's error and pages."""
    status = f" (HTTP {error.status_code})" if error.status_code else ""
    detail = redact(f"{error.error_name}: {error.message}" if error.message else error.error_name, secrets)
    if error.is_transient:
        return f"{_TRANSIENT_WHY.get(error.reason, 'The model call failed transiently')}{status}: {detail}"
    if error.reason == "auth":
        return (
            f"The model provider refused the credentials{status}: {detail}. Retrying cannot help: check the "
            "provider's API key and its permissions."
        )
    if error.reason == "bad-request":
        return f"The model provider rejected the request as invalid{status}: {detail}. Retrying cannot help."
    return f"The model call failed{status}: {detail}."


def retry_plan(
    error: ModelCallError,
    *,
    policy: RetryPolicy,
    previous_attempts: int,
    now: datetime,
    secrets: Iterable[str] = (),
    random: Callable[[], float] = _random.random,
) -> RetryPlan | None:
    """The retry after ``error`` when it is transient and ``policy`` has an attempt left after
    ``previous_attempts`` retries in a row; None when the run must fail instead."""
    attempt = previous_attempts + 1
    if not error.is_transient or attempt > policy.attempts:
        return None
    delay = policy.delay_seconds(attempt, retry_after_ms=error.retry_after_ms, random=random)
    return RetryPlan(
        attempt=attempt,
        limit=policy.attempts,
        retry_at=now + timedelta(seconds=delay),
        delay_seconds=delay,
        reason=error.reason,
        summary=model_error_summary(error, secrets=secrets),
    )


def model_error_failure(
    error: ModelCallError, *, policy: RetryPolicy, previous_attempts: int, secrets: Iterable[str] = ()
) -> str:
    """Why a run fails on ``error``: the summary, and for a transient error that its retries are used up."""
    summary = model_error_summary(error, secrets=secrets)
    if not error.is_transient:
        return summary
    if policy.attempts == 0:
        return f"{summary}. Retries are off for this agent, so the run fails."
    return f"{summary}. Gave up after {previous_attempts} retries in a row (the retry policy allows {policy.attempts})."
