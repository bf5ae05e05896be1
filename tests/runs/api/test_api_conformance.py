"""The OpenAPI document is the contract: schemathesis drives the live ASGI app from it, every check on (issue 12).

Every phase runs (examples, coverage, fuzzing, then stateful sequences along the links schemathesis infers)
with all of schemathesis's checks, as a signed-in user with a token. Examples are bounded and the seed is fixed,
so the run is the same on every machine and takes well under a minute per database. Each distinct failure is
reported with a curl command that reproduces it.
"""

from __future__ import annotations

import asyncio

import pytest
import schemathesis
from asgiref.sync import sync_to_async
from django.db import connections
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import Status, events, from_schema

from accounts.services import token_create
from tests.factories import make_user, token_of

pytestmark = pytest.mark.django_db(transaction=True)

#: Examples per operation in the fuzzing phase (the coverage phase enumerates each limit's edges on its own).
MAX_EXAMPLES = 30
#: schemathesis's default answers that count as refusing invalid input, plus 413: a body over 1 MiB is refused
#: for its size before its content is looked at.
REJECTIONS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]
#: schemathesis's default answers to schema-valid data, plus 422: an Idempotency-Key the generator sends again with
#: another body is refused for what was sent before, as a run_id that exists is (409), which no schema can foresee.
ACCEPTANCES = ["2xx", "3xx", "401", "403", "404", "409", "422", "429", "5xx"]


def conformance_config(token: str, spare_token_id: int = 0) -> SchemathesisConfig:
    """``token`` authenticates every request; ``spare_token_id``, another token of the same user, is the one
    ``DELETE /api/tokens/{id}/`` revokes (the coverage phase's id 1 would be ``token`` itself, and every answer
    after it a 401)."""
    return SchemathesisConfig.from_dict(
        {
            "headers": {"Authorization": f"Token {token}"},
            "checks": {"enabled": True, "negative_data_rejection": {"expected-statuses": REJECTIONS},
                       "positive_data_acceptance": {"expected-statuses": ACCEPTANCES}},
            "generation": {"max-examples": MAX_EXAMPLES, "database": "none"},
            "phases": {"stateful": {"enabled": True, "max-steps": 10, "generation": {"max-examples": 10}}},
            "seed": 7,
            # No .schemathesis/ cache between runs: each run is the same, and the work tree stays clean.
            "cache": {"enabled": False},
            "request-timeout": 10,
            # The events endpoint tails a queued run for as long as it stays queued: it is cut short.
            # So do the chat's streams (a turn stays queued: the run has no worker).
            "operations": [{"include-operation-id": "runs_events", "request-timeout": 0.5, "max-stream-events": 5},
                           {"include-operation-id": "chat_send", "request-timeout": 0.5, "max-stream-events": 5,
                            "generation": {"max-examples": 5}},
                           {"include-operation-id": "chat_stream", "request-timeout": 0.5, "max-stream-events": 5,
                            "generation": {"max-examples": 5}},
                           {"include-operation-id": "tokens_revoke", "parameters": {"path.id": spare_token_id}}],
        }
    )


def failures_of(stream) -> list[str]:
    """Every distinct failure (operation, title, message) of an engine run, with how to reproduce it."""
    found: dict[tuple[str, ...], str] = {}
    for event in stream:
        if isinstance(event, events.ScenarioFinished) and event.status == Status.FAILURE:
            for checks in event.recorder.checks.values():
                for check in checks:
                    if check.failure_info is None:
                        continue
                    failure = check.failure_info.failure
                    found.setdefault(
                        (str(failure.operation), failure.title, failure.message),
                        f"{failure.operation}: {failure.title}: {failure.message}\n"
                        f"  {check.failure_info.code_sample[:1000]}",
                    )
        elif isinstance(event, events.NonFatalError):
            found.setdefault(("error", event.label), f"{event.label}: {event.info.message}")
        elif isinstance(event, events.FatalError):
            found.setdefault(("fatal",), f"fatal: {event.exception!r}")
        elif isinstance(event, events.EngineFinished):
            found.update({("after-run", str(failure)): str(failure) for failure in event.failures})
    return sorted(found.values())


@pytest.mark.timeout(600)  # the chat's streams wait out their 0.5 s; with other work on the machine, past 120 s
def test_every_answer_of_the_api_conforms_to_its_openapi_document():
    from deuz_project.asgi import application

    user = make_user("fuzz")
    token, spare = token_of(user), token_create(user=user, name="revoked by the run").token.pk
    schema = schemathesis.openapi.from_asgi("/api/schema/", application, config=conformance_config(token, spare))
    try:
        failures = failures_of(from_schema(schema).execute())
    finally:
        # Sync views ran in asgiref's one thread for sync code (there is no outer async_to_sync here, so
        # asyncio.run reaches the same one); its connection must close before the test database is dropped.
        asyncio.run(sync_to_async(connections.close_all)())
    assert not failures, "\n\n".join(failures)


def test_the_run_covers_every_operation_of_the_document(django_user_model):
    # A document that lost an operation (the events endpoint, say) would pass the test above by testing less.
    from deuz_project.asgi import application

    schema = schemathesis.openapi.from_asgi("/api/schema/", application, config=conformance_config("unused"))
    labels = {operation.ok().label for operation in schema.get_all_operations()}
    assert labels >= {
        "GET /api/runs/",
        "POST /api/runs/",
        "GET /api/runs/{run_id}/",
        "GET /api/runs/{run_id}/checkpoints/",
        "GET /api/runs/{run_id}/events/",
        "POST /api/runs/{run_id}/approvals/{approval_id}/",
        "POST /api/runs/{run_id}/cancel/",
        "GET /api/tokens/",
        "POST /api/tokens/",
        "DELETE /api/tokens/{id}/",
        "POST /api/chat/",
        "GET /api/chat/{chat_id}/stream/",
        "GET /api/chat/{chat_id}/messages/",
    }
