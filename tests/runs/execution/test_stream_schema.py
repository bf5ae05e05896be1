"""Every run shape's stream validates, part by part, against the StreamPart union of the OpenAPI document at
/api/schema/ (with the jsonschema package): approved, denied, expired, cancelled while waiting and mid-leg, a
sub-agent's approval, a crash and its recovery, a retried model error, a failed run."""

from __future__ import annotations

import json
import signal
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from jsonschema import Draft7Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from approvals.models import ApprovalRequest
from approvals.services import approval_expire_due
from runs.models import JournalEntry, Run
from tests.factories import make_queued_run, make_suspended_run, verdict
from tests.processes import wait_until
from tests.runs.execution import recordings as rec
from tests.runs.runtime.local_api import JSONReply
from tests.streams import follow, seqs

pytestmark = pytest.mark.django_db(transaction=True)

_DOCUMENT = "urn:deuz:openapi"


def _as_json_schema(node):
    """OpenAPI 3.0's ``nullable`` as JSON Schema (its other keywords here are JSON Schema's already)."""
    if isinstance(node, list):
        return [_as_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _as_json_schema(value) for key, value in node.items()}
    if node.pop("nullable", False) and "type" in node:
        node["type"] = [node["type"], "null"]
    if "$ref" in node:
        node["$ref"] = _DOCUMENT + node["$ref"]
    return node


@pytest.fixture(scope="module")
def part_validator(django_db_blocker) -> Draft7Validator:
    """A validator of one stream part: the document's StreamPart union, its references resolved in the document."""
    with django_db_blocker.unblock():
        document = json.loads(Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").content)
    events = document["paths"]["/api/runs/{run_id}/events/"]["get"]["responses"]["200"]["content"]["text/event-stream"]
    assert events["schema"]["x-sse-data"] == {"$ref": "#/components/schemas/StreamPart"}
    converted = _as_json_schema(document)
    registry = Registry().with_resource(_DOCUMENT, Resource(contents=converted, specification=DRAFT7))
    return Draft7Validator(converted["components"]["schemas"]["StreamPart"], registry=registry)


def assert_valid_stream(part_validator, user, run_id: str) -> list[dict]:
    """Follow the run's stream from the start; every part validates against the union, and its seqs are gapless."""
    events = follow(user, run_id)
    parts = [event["data"] for event in events if event["id"] is not None]
    for seq, part in enumerate(parts):
        errors = [error.message for error in part_validator.iter_errors(part)]
        assert not errors, (seq, part, errors)
    assert seqs(events) == list(range(len(parts))) and events[-1]["data"] == "[DONE]"
    return parts


def types(parts: list[dict]) -> list[str]:
    return [part["type"] for part in parts]


def test_an_approved_runs_stream_validates(part_validator, drain_runs, owner, reviewer):
    verdict(make_suspended_run(drain_runs, "s-ok", user=owner), user=reviewer)
    drain_runs()
    parts = assert_valid_stream(part_validator, owner, "s-ok")
    assert {"tool-approval-request", "tool-approval-verdict", "tool-result", "step-finish"} <= set(types(parts))


def test_a_denied_runs_stream_validates(part_validator, drain_runs, owner, reviewer):
    verdict(make_suspended_run(drain_runs, "s-no", user=owner), approved=False, reason="No.", user=reviewer)
    drain_runs()
    assert "tool-approval-verdict" in types(assert_valid_stream(part_validator, owner, "s-no"))


def test_an_expired_runs_stream_validates(part_validator, drain_runs, owner):
    request = make_suspended_run(drain_runs, "s-late", user=owner)
    ApprovalRequest.objects.filter(pk=request.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    approval_expire_due()
    drain_runs()
    assert "tool-approval-verdict" in types(assert_valid_stream(part_validator, owner, "s-late"))


def test_a_sub_agent_approvals_stream_validates(part_validator, drain_runs, owner, reviewer):
    make_queued_run("s-code", agent="coder", user=owner)
    drain_runs()
    verdict(ApprovalRequest.objects.get(run__run_id="s-code"), user=reviewer)
    drain_runs()
    parts = assert_valid_stream(part_validator, owner, "s-code")
    assert any(part.get("agent_path") == ["coder"] for part in parts)


def test_a_run_cancelled_while_waiting_validates(part_validator, drain_runs, owner, token_client):
    make_suspended_run(drain_runs, "s-stop", user=owner)
    token_client(owner).post("/api/runs/s-stop/cancel/", {"reason": "Wrong."}, format="json")
    assert types(assert_valid_stream(part_validator, owner, "s-stop"))[-2:] == ["cancelled", "finish"]


def test_a_failed_runs_stream_validates(part_validator, provider, drain_runs, owner):
    provider(JSONReply(401, rec.UNAUTHORIZED_BODY))
    make_queued_run("s-bad", user=owner)
    drain_runs()
    assert "error" in types(assert_valid_stream(part_validator, owner, "s-bad"))


def test_a_retried_runs_stream_validates(part_validator, provider, drain_runs, owner):
    provider(rec.LOOKUP, JSONReply(429, rec.RATE_LIMITED_BODY), rec.ANSWER)
    make_queued_run("s-retry", user=owner)
    drain_runs()
    parts = assert_valid_stream(part_validator, owner, "s-retry")
    assert {"retry", "recovery"} <= set(types(parts))


def test_a_run_cancelled_mid_leg_validates(part_validator, workers, token_client, owner):
    make_queued_run("s-mid", agent="coder", user=owner)
    workers("slow", DEUZ_DEMO_DELAY_MS="300")
    wait_until(lambda: JournalEntry.objects.filter(run__run_id="s-mid", is_sentinel=False).count() > 2,
               what="the first delta")
    token_client(owner).post("/api/runs/s-mid/cancel/", {"reason": "Wrong repository."}, format="json")
    wait_until(lambda: Run.objects.get(run_id="s-mid").status == "cancelled", what="the leg to stop")
    assert types(assert_valid_stream(part_validator, owner, "s-mid"))[-2:] == ["cancelled", "finish"]


def test_a_crashed_and_recovered_runs_stream_validates(part_validator, workers, owner):
    make_queued_run("s-crash", user=owner)
    doomed = workers("doomed", DEUZ_FAULT="mid-stream:12", DEUZ_DEMO_DELAY_MS="10")
    assert doomed.wait_exit() == -signal.SIGKILL
    assert "recovery" in types(assert_valid_stream(part_validator, owner, "s-crash"))
