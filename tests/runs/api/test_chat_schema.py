"""What the OpenAPI document says of the AI SDK chat wire (runs.api.chat_views)."""

from __future__ import annotations

import pytest

from tests.runs.api.test_api_schema import operation, schema  # noqa: F401 (the module's document fixture)


@pytest.mark.parametrize(("method", "path"), [("post", "/api/chat/"), ("get", "/api/chat/{chat_id}/stream/")])
def test_the_chat_streams_are_documented_as_text_event_streams(schema, method, path):  # noqa: F811
    answer = operation(schema, method, path)["responses"]["200"]
    assert list(answer["content"]) == ["text/event-stream"]
    assert "x-vercel-ai-ui-message-stream: v1" in answer["description"]


def test_the_chat_post_documents_its_refusals_and_its_body(schema):  # noqa: F811
    post = operation(schema, "post", "/api/chat/")
    assert {"400", "401", "403", "404", "409", "413", "415", "422", "429"} <= set(post["responses"])
    body = schema["components"]["schemas"]["ChatInput"]
    assert set(body["required"]) == {"id", "messages", "trigger"}
    (trigger,) = body["properties"]["trigger"]["allOf"]
    trigger = schema["components"]["schemas"][trigger["$ref"].rsplit("/", 1)[1]]
    assert trigger["enum"] == ["submit-message", "regenerate-message"]
    assert {parameter["name"] for parameter in post["parameters"]} >= {"Idempotency-Key"}


def test_the_stream_documents_204_when_no_turn_is_active(schema):  # noqa: F811
    assert "204" in operation(schema, "get", "/api/chat/{chat_id}/stream/")["responses"]


def test_the_messages_are_documented_as_an_array_of_ui_messages(schema):  # noqa: F811
    answer = operation(schema, "get", "/api/chat/{chat_id}/messages/")["responses"]["200"]
    listed = answer["content"]["application/json"]["schema"]
    assert (listed["type"], listed["items"]["required"]) == ("array", ["role", "parts"])
