"""Transient model errors retried durably by the worker, against a local server speaking Anthropic's streaming API.

The demo reimbursement agent runs on ``anthropic:claude-sonnet-4-6`` with ANTHROPIC_BASE_URL pointing at the
local server (tests/runs/runtime/local_api.py); the backoff is shortened to nothing by settings, so a retry is due at
once and ``drain_runs`` runs every leg, unless the provider's retry-after asks for a wait.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from runs.execution.legs import leg_secrets
from runs.models import JournalEntry, Run
from runs.presenters.state import run_people_state
from runs.presenters.timeline import run_step_list
from runs.services.lifecycle import run_claim
from tests.commands import runs_cli
from tests.factories import make_queued_run, make_user
from tests.runs.execution import recordings as rec
from tests.runs.execution.conftest import ANTHROPIC_KEY
from tests.runs.runtime.local_api import JSONReply

pytestmark = pytest.mark.django_db(transaction=True)

RATE_LIMITED = JSONReply(429, rec.RATE_LIMITED_BODY)
OVERLOADED = JSONReply(529, rec.OVERLOADED_BODY)


def journal(run_id: str) -> list[str]:
    """The run's journal in order: each part's type, "|" for a leg's sentinel."""
    entries = JournalEntry.objects.filter(run__run_id=run_id).order_by("id")
    return ["|" if entry.is_sentinel else entry.decoded_part["type"] for entry in entries]


def journal_parts(run_id: str, kind: str) -> list[dict]:
    entries = JournalEntry.objects.filter(run__run_id=run_id, is_sentinel=False).order_by("seq")
    return [entry.decoded_part for entry in entries if entry.decoded_part["type"] == kind]


@pytest.fixture
def rate_limited_three_times(provider, drain_runs):
    """A run whose second model call is answered 429 three times, then succeeds; drained to its end."""
    api = provider(rec.LOOKUP, RATE_LIMITED, RATE_LIMITED, RATE_LIMITED, rec.ANSWER)
    make_queued_run("limited")
    legs = drain_runs()
    return api, legs, Run.objects.get(run_id="limited")


# ------------------------------------------------------------------ 429 three times, then success


def test_a_run_rate_limited_three_times_completes_with_no_operator(rate_limited_three_times):
    api, legs, run = rate_limited_three_times
    assert (run.status, run.finish_reason, run.error, legs) == ("completed", "stop", "", 4)
    assert [(leg.kind, leg.finish_reason) for leg in run.legs.all()] == [
        ("start", "retry"), ("retry", "retry"), ("retry", "retry"), ("retry", "stop"),
    ]


def history(body: dict) -> list[tuple]:
    """A request's history as (role, block type, tool call id, tool result as JSON) per block."""
    return [
        (message["role"], block["type"], block.get("id") or block.get("tool_use_id"),
         json.loads(block["content"]) if block["type"] == "tool_result" else None)
        for message in body["messages"] for block in message["content"]
    ]


def test_no_step_is_repeated_across_the_retries(rate_limited_three_times):
    api, legs, run = rate_limited_three_times
    first, *retried = api.bodies
    # Step 0 was asked once; every retry asked step 1 again on the same history: one lookup, one result.
    assert (len(api.bodies), len(first["messages"])) == (5, 1)
    assert all(history(body) == history(retried[0]) for body in retried)
    assert [(role, kind) for role, kind, _, _ in history(retried[0])] == [
        ("user", "text"), ("assistant", "text"), ("assistant", "tool_use"), ("user", "tool_result"),
    ]
    assert [part["step_index"] for part in journal_parts("limited", "step-finish")] == [0, 1]


def test_a_successful_step_resets_the_attempt_count(rate_limited_three_times):
    api, legs, run = rate_limited_three_times
    assert (run.retry_attempt, run.retry_at) == (0, None)


def test_each_retry_is_the_last_part_of_its_leg_and_the_next_leg_opens_with_one_recovery(rate_limited_three_times):
    entries = journal("limited")
    first, second, third, last, after = [leg.split() for leg in " ".join(entries).split("|")]
    assert (first[0], first[-2:], after) == ("start", ["error", "retry"], [])
    assert second == third == ["recovery", "step-start", "error", "retry"]
    assert (last[0], last[-1], entries.count("recovery")) == ("recovery", "finish", 3)


def test_the_retry_parts_say_which_attempt_when_and_why(rate_limited_three_times):
    retries = journal_parts("limited", "retry")
    assert [(part["attempt"], part["max_attempts"], part["reason"]) for part in retries] == [
        (1, 5, "rate-limit"), (2, 5, "rate-limit"), (3, 5, "rate-limit"),
    ]
    assert all(isinstance(part["retry_at"], int) and "attempt" in part["message"] for part in retries)


def test_the_timeline_shows_each_retry(rate_limited_three_times):
    api, legs, run = rate_limited_three_times
    steps = [step for step in run_step_list(run=run) if step.kind == "retry_scheduled"]
    assert [("attempt 1 of 5" in steps[0].detail), ("attempt 3 of 5" in steps[2].detail), len(steps)] == [True, True, 3]
    assert "rate limit was hit (HTTP 429): RateLimitError" in steps[0].detail


# ------------------------------------------------------------------ waiting for retry_at


@pytest.fixture
def retry_scheduled(provider, drain_runs):
    """A run whose first model call was answered 429 with retry-after: 30; it waits for its retry."""
    owner = make_user("ada")
    provider(JSONReply(429, rec.RATE_LIMITED_BODY, headers={"retry-after": "30"}))
    before = timezone.now()
    make_queued_run("waiting", user=owner)
    legs = drain_runs()
    return owner, before, legs, Run.objects.get(run_id="waiting")


def test_the_providers_retry_after_sets_when_the_run_is_retried(retry_scheduled):
    owner, before, legs, run = retry_scheduled
    assert (legs, run.status, run.retry_attempt, run.retry_limit) == (1, "queued", 1, 5)
    assert before + timedelta(seconds=30) <= run.retry_at <= timezone.now() + timedelta(seconds=30)


def test_a_queued_run_is_not_claimed_before_its_retry_at():
    make_queued_run("later")
    Run.objects.filter(run_id="later").update(retry_at=timezone.now() + timedelta(minutes=5), retry_attempt=1)
    assert run_claim(worker_id="w", run_id="later") == []
    Run.objects.filter(run_id="later").update(retry_at=timezone.now() - timedelta(seconds=1))
    assert [(claim.run_id, claim.kind) for claim in run_claim(worker_id="w")] == [("later", "retry")]


def test_the_api_shows_the_scheduled_retry_with_its_reason(retry_scheduled, token_client):
    owner, before, legs, run = retry_scheduled
    body = token_client(owner).get("/api/runs/waiting/").json()
    assert (body["status"], body["retry_attempt"], body["retry_limit"]) == ("queued", 1, 5)
    assert body["retry_at"] is not None
    assert body["error"].startswith("Retry scheduled at ") and ", attempt 1 of 5: The provider's rate limit" in body["error"]


def test_the_run_page_shows_the_scheduled_retry(retry_scheduled):
    owner, before, legs, run = retry_scheduled
    owner.is_staff = True  # run pages are support staff's
    owner.save(update_fields=["is_staff"])
    browser = Client()
    browser.force_login(owner)
    html = browser.get("/runs/waiting/").content.decode()
    assert 'data-state="retry_scheduled"' in html and "attempt 1 of 5" in html


def test_runs_show_prints_the_scheduled_retry(retry_scheduled):
    why = next(line for line in runs_cli("show", "waiting").splitlines() if line.strip().startswith("Why:"))
    assert "Retry scheduled at " in why and "attempt 1 of 5" in why and "HTTP 429" in why


# ------------------------------------------------------------------ failing for good


def test_a_bad_key_fails_the_run_at_once_with_the_reason(provider, drain_runs, settings):
    settings.DEUZ_MODEL_MAX_RETRIES = 2  # the SDK's own retries leave a 401 alone too
    api = provider(JSONReply(401, rec.UNAUTHORIZED_BODY))
    make_queued_run("unauthorized")
    legs = drain_runs()
    run = Run.objects.get(run_id="unauthorized")
    assert (legs, len(api.requests), run.status, run.retry_attempt) == (1, 1, "failed", 0)
    assert "refused the credentials (HTTP 401): AuthenticationError" in run.error and "check the" in run.error
    assert "retry" not in journal("unauthorized")


def test_a_run_fails_with_the_reason_once_its_retries_are_used_up(provider, drain_runs, settings):
    settings.DEUZ_MODEL_RETRY_ATTEMPTS = 2
    api = provider(rec.LOOKUP, OVERLOADED, OVERLOADED, OVERLOADED)
    make_queued_run("overloaded")
    legs = drain_runs()
    run = Run.objects.get(run_id="overloaded")
    assert (legs, len(api.requests), run.status, run.finish_reason) == (3, 4, "failed", "error")
    assert run.error.startswith("The provider is overloaded (HTTP 529): OverloadedError")
    assert "Gave up after 2 retries in a row" in run.error


def test_an_agents_own_policy_beats_the_settings(provider, drain_runs, settings):
    settings.DEUZ_AGENTS = {**settings.DEUZ_AGENTS, "impatient": "tests.runs.execution.agents.impatient_agent"}
    api = provider(RATE_LIMITED, RATE_LIMITED, rec.LOOKUP)
    make_queued_run("impatient", agent="impatient")
    drain_runs()
    run = Run.objects.get(run_id="impatient")
    assert (len(api.requests), run.status) == (2, "failed")
    assert "allows 1" in run.error


def test_an_operators_resume_counts_the_retries_afresh(provider, drain_runs, settings):
    settings.DEUZ_MODEL_RETRY_ATTEMPTS = 1
    provider(RATE_LIMITED, RATE_LIMITED, rec.LOOKUP, rec.ANSWER)
    make_queued_run("resumed")
    drain_runs()
    assert Run.objects.get(run_id="resumed").status == "failed"
    runs_cli("resume", "resumed")
    drain_runs()
    assert Run.objects.get(run_id="resumed").status == "completed"


def test_a_cancel_while_a_retry_waits_ends_the_run(retry_scheduled):
    runs_cli("cancel", "waiting")
    assert (Run.objects.get(run_id="waiting").status, run_claim(worker_id="w")) == ("cancelled", [])


# ------------------------------------------------------------------ secrets


def test_no_key_reaches_the_runs_error_or_its_journal(provider, drain_runs):
    provider(JSONReply(401, {"type": "error", "error": {"type": "authentication_error",
                                                        "message": f"invalid x-api-key {ANTHROPIC_KEY}"}}))
    make_queued_run("leaky")
    drain_runs()
    texts = [Run.objects.get(run_id="leaky").error, *(entry.part for entry in JournalEntry.objects.all())]
    assert not any(ANTHROPIC_KEY in text for text in texts)


def test_extra_model_header_values_are_secrets_of_a_leg(settings):
    settings.DEUZ_MODEL_EXTRA_HEADERS = {"X-Gateway-Token": "gw-3f9a61c0d2b84e7f"}
    assert "gw-3f9a61c0d2b84e7f" in leg_secrets()


def test_a_retry_of_the_first_step_opens_with_one_recovery_at_step_0(provider, drain_runs):
    provider(RATE_LIMITED, rec.LOOKUP, rec.ANSWER)
    make_queued_run("first-step")
    drain_runs()
    first, second, after = [leg.split() for leg in " ".join(journal("first-step")).split("|")]
    recoveries = journal_parts("first-step", "recovery")
    assert (first, second[:2], after) == (["start", "step-start", "error", "retry"], ["recovery", "step-start"], [])
    assert [part["restarted_step_index"] for part in recoveries] == [0]


def test_runs_follow_prints_each_retry(rate_limited_three_times):
    lines = runs_cli("follow", "limited").splitlines()
    retries = [line for line in lines if line.startswith("(retry) Retry scheduled at ")]
    assert [("attempt 1 of 5" in retries[0]), len(retries)] == [True, 3]


def test_a_run_completed_after_retries_says_so(rate_limited_three_times):
    api, legs, run = rate_limited_three_times
    assert "retried 3 times" in run_people_state(run).why


def test_a_running_retry_shows_its_attempt():
    make_queued_run("again")
    Run.objects.filter(run_id="again").update(retry_attempt=2, retry_limit=5, retry_at=timezone.now())
    run_claim(worker_id="w")
    state = run_people_state(Run.objects.get(run_id="again"))
    assert (state.key, "Attempt 2 of 5" in state.why) == ("retrying", True)
