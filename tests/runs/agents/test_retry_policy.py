"""The retry policy itself: backoff, jitter, retry-after, limits, and where its defaults come from."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runs.agents import agent_build
from runs.agents.retries import RetryPolicy, model_error_summary, retry_plan
from runs.runtime.exceptions import ModelCallError

NOW = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


def rate_limited(*, retry_after_ms: int | None = None) -> ModelCallError:
    return ModelCallError(
        "Number of request tokens has exceeded your per-minute rate limit",
        error_name="RateLimitError", is_transient=True, reason="rate-limit", status_code=429,
        retry_after_ms=retry_after_ms,
    )


def test_the_backoff_doubles_per_attempt_and_jitters_between_half_and_all_of_it():
    policy = RetryPolicy(attempts=5, base_seconds=2, max_seconds=300)
    longest = [policy.delay_seconds(attempt, random=lambda: 1.0) for attempt in range(1, 5)]
    shortest = [policy.delay_seconds(attempt, random=lambda: 0.0) for attempt in range(1, 5)]
    assert (longest, shortest) == ([2, 4, 8, 16], [1, 2, 4, 8])


def test_no_wait_is_longer_than_max_seconds():
    policy = RetryPolicy(attempts=50, base_seconds=2, max_seconds=300)
    assert policy.delay_seconds(40, random=lambda: 1.0) == 300


def test_the_providers_retry_after_is_the_shortest_wait():
    policy = RetryPolicy(attempts=5, base_seconds=2, max_seconds=300)
    assert policy.delay_seconds(1, retry_after_ms=7000, random=lambda: 0.0) == 7.0


def test_a_retry_after_beyond_max_seconds_is_cut_to_it():
    policy = RetryPolicy(attempts=5, base_seconds=2, max_seconds=60)
    assert policy.delay_seconds(1, retry_after_ms=3_600_000, random=lambda: 0.0) == 60


@pytest.mark.parametrize(
    "options",
    [{"attempts": -1}, {"attempts": 2.5}, {"base_seconds": -1}, {"max_seconds": float("inf")},
     {"base_seconds": 10, "max_seconds": 5}],
)
def test_a_bad_policy_is_refused(options):
    with pytest.raises(ValueError, match="RetryPolicy"):
        RetryPolicy(**options)


def test_a_transient_error_plans_the_next_attempt_at_its_delay():
    plan = retry_plan(rate_limited(retry_after_ms=7000), policy=RetryPolicy(attempts=5), previous_attempts=2,
                      now=NOW, random=lambda: 0.0)
    assert (plan.attempt, plan.limit, plan.retry_at, plan.reason) == (3, 5, datetime(2026, 3, 2, 9, 30, 7, tzinfo=UTC),
                                                                      "rate-limit")
    assert plan.description.startswith("Retry scheduled at 2026-03-02 09:30:07 UTC, attempt 3 of 5: The provider's rate limit")


def test_no_retry_is_planned_past_the_limit():
    assert retry_plan(rate_limited(), policy=RetryPolicy(attempts=3), previous_attempts=3, now=NOW) is None


def test_a_permanent_error_is_never_retried():
    error = ModelCallError("invalid x-api-key", error_name="AuthenticationError", is_transient=False, reason="auth",
                           status_code=401)
    assert retry_plan(error, policy=RetryPolicy(attempts=5), previous_attempts=0, now=NOW) is None


def test_the_summary_of_an_error_is_redacted_of_secrets():
    error = ModelCallError("bad gateway token gw-7a1f9c03e2", error_name="InternalServerError", is_transient=True,
                           reason="server", status_code=502)
    assert "gw-7a1f9c03e2" not in model_error_summary(error, secrets=["gw-7a1f9c03e2"])


def test_an_agent_without_a_policy_takes_the_settings_at_build_time(settings):
    settings.DEUZ_MODEL_RETRY_ATTEMPTS = 3
    settings.DEUZ_MODEL_RETRY_BASE_SECONDS = 0.5
    settings.DEUZ_MODEL_RETRY_MAX_SECONDS = 20
    assert agent_build("reimbursement").retry == RetryPolicy(attempts=3, base_seconds=0.5, max_seconds=20)


SHOW_RETRY_SETTINGS = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps([settings.DEUZ_MODEL_RETRY_ATTEMPTS, settings.DEUZ_MODEL_RETRY_BASE_SECONDS,
                  settings.DEUZ_MODEL_RETRY_MAX_SECONDS]))
"""


def test_the_retry_settings_default_to_five_attempts_from_two_seconds_up_to_five_minutes(run_python):
    result = run_python(SHOW_RETRY_SETTINGS)
    assert (result.returncode, result.stdout.strip()) == (0, "[5, 2.0, 300.0]"), result.stderr


def test_the_retry_settings_are_read_from_the_environment(run_python):
    result = run_python(SHOW_RETRY_SETTINGS, DEUZ_MODEL_RETRY_ATTEMPTS="8", DEUZ_MODEL_RETRY_BASE_SECONDS="0.25",
                        DEUZ_MODEL_RETRY_MAX_SECONDS="30")
    assert (result.returncode, result.stdout.strip()) == (0, "[8, 0.25, 30.0]"), result.stderr


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"DEUZ_MODEL_RETRY_ATTEMPTS": "five"}, "DEUZ_MODEL_RETRY_ATTEMPTS"),
        ({"DEUZ_MODEL_RETRY_ATTEMPTS": "-1"}, "DEUZ_MODEL_RETRY_ATTEMPTS"),
        ({"DEUZ_MODEL_RETRY_BASE_SECONDS": "soon"}, "DEUZ_MODEL_RETRY_BASE_SECONDS"),
        ({"DEUZ_MODEL_RETRY_BASE_SECONDS": "10", "DEUZ_MODEL_RETRY_MAX_SECONDS": "5"}, "DEUZ_MODEL_RETRY_MAX_SECONDS"),
    ],
)
def test_a_malformed_retry_setting_stops_start_up_naming_it(run_python, env, named):
    result = run_python(SHOW_RETRY_SETTINGS, **env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and named in result.stderr
