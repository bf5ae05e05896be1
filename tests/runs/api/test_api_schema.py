"""What the OpenAPI document promises, read from /api/schema/: statuses, limits, the events endpoint (issue 12)."""

from __future__ import annotations

import json

import pytest

from tests.factories import make_queued_run

SCHEMA_ACCEPT = "application/vnd.oai.openapi+json"


@pytest.fixture(scope="module")
def schema(django_db_blocker) -> dict:
    from django.test import Client

    with django_db_blocker.unblock():
        return json.loads(Client().get("/api/schema/", HTTP_ACCEPT=SCHEMA_ACCEPT).content)


def operation(schema: dict, method: str, path: str) -> dict:
    return schema["paths"][path][method]


def parameter(op: dict, name: str) -> dict:
    (found,) = [p for p in op["parameters"] if p["name"] == name]
    return found


OPERATIONS = [
    ("get", "/api/runs/"),
    ("post", "/api/runs/"),
    ("get", "/api/runs/{run_id}/"),
    ("get", "/api/runs/{run_id}/checkpoints/"),
    ("get", "/api/runs/{run_id}/events/"),
    ("post", "/api/runs/{run_id}/approvals/{approval_id}/"),
    ("post", "/api/runs/{run_id}/cancel/"),
]


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_every_operation_documents_401_asking_for_a_token(schema, method, path):
    unauthenticated = operation(schema, method, path)["responses"]["401"]
    assert unauthenticated["headers"]["WWW-Authenticate"]["schema"]["enum"] == ["Token"]


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "/api/runs/"), ("get", "/api/runs/{run_id}/"), ("get", "/api/runs/{run_id}/checkpoints/"),
     ("get", "/api/runs/{run_id}/events/")],
)
def test_reads_document_no_403_since_no_permission_is_refused_there(schema, method, path):
    assert "403" not in operation(schema, method, path)["responses"]


@pytest.mark.parametrize(
    ("method", "path"),
    [("post", "/api/runs/{run_id}/cancel/"), ("post", "/api/runs/{run_id}/approvals/{approval_id}/")],
)
def test_actions_a_permission_can_refuse_document_403(schema, method, path):
    assert "403" in operation(schema, method, path)["responses"]


@pytest.mark.parametrize("path", ["/api/runs/", "/api/runs/{run_id}/checkpoints/"])
def test_lists_document_404_for_a_page_that_does_not_exist(schema, path):
    responses = operation(schema, "get", path)["responses"]
    assert "Invalid page." in responses["404"]["description"]
    assert parameter(operation(schema, "get", path), "page")["schema"]["minimum"] == 1


def test_checkpoints_document_400_for_a_bad_include_sub_agents(schema):
    assert "include_sub_agents" in operation(schema, "get", "/api/runs/{run_id}/checkpoints/")["responses"]["400"][
        "description"]


@pytest.mark.parametrize("path", ["/api/runs/", "/api/runs/{run_id}/approvals/{approval_id}/"])
def test_bodies_document_413_and_415(schema, path):
    assert {"400", "413", "415"} <= set(operation(schema, "post", path)["responses"])


@pytest.mark.parametrize(("method", "path"), [op for op in OPERATIONS if "{run_id}" in op[1] and "events" not in op[1]])
def test_the_run_id_in_a_path_documents_its_limits(schema, method, path):
    run_id = parameter(operation(schema, method, path), "run_id")["schema"]
    assert (run_id["minLength"], run_id["maxLength"], run_id["pattern"]) == (1, 200, "^[A-Za-z0-9._:-]+$")


def test_the_start_body_documents_its_limits(schema):
    start = schema["components"]["schemas"]["RunStartInput"]["properties"]
    assert (start["messages"]["minItems"], start["messages"]["maxItems"]) == (1, 200)
    assert (start["run_id"]["minLength"], start["run_id"]["maxLength"]) == (1, 200)
    assert start["agent"]["allOf"] == [{"$ref": "#/components/schemas/AgentEnum"}]
    assert set(schema["components"]["schemas"]["AgentEnum"]["enum"]) == {"assistant", "coder", "files", "reimbursement"}


def test_messages_and_parts_are_closed_and_only_text_goes_in(schema):
    components = schema["components"]["schemas"]
    assert components["MessageInput"]["additionalProperties"] is False
    assert components["MessageInputRoleEnum"]["enum"] == ["user", "system", "assistant"]
    assert components["InputPart"]["discriminator"]["mapping"] == {"text": "#/components/schemas/TextPartInput"}
    assert components["TextPartInput"]["properties"]["text"]["maxLength"] == 100_000


def test_text_documents_that_nul_is_refused(schema):
    text = schema["components"]["schemas"]["TextPartInput"]["properties"]["text"]
    assert text["not"] == {"type": "string", "pattern": "\\u0000"}


def test_the_verdict_reason_documents_its_maximum_length(schema):
    assert schema["components"]["schemas"]["ApprovalDecideInput"]["properties"]["reason"]["maxLength"] == 2000


def test_the_cancel_reason_documents_its_maximum_length_and_the_body_is_optional(schema):
    cancel = operation(schema, "post", "/api/runs/{run_id}/cancel/")
    assert schema["components"]["schemas"]["RunCancelInput"]["properties"]["reason"]["maxLength"] == 2000
    assert not cancel["requestBody"].get("required", False) and {"400", "413", "415"} <= set(cancel["responses"])


def test_the_events_endpoint_is_documented_as_a_text_event_stream(schema):
    events = operation(schema, "get", "/api/runs/{run_id}/events/")
    assert set(events["responses"]["200"]["content"]) == {"text/event-stream"}
    assert parameter(events, "Last-Event-ID")["in"] == "header"
    # The cursor's bounds are those parse_cursor reads: from -1 to 18 digits.
    assert parameter(events, "cursor")["schema"] == {"type": "integer", "minimum": -1, "maximum": 10**18 - 1}
    assert {"400", "401"} <= set(events["responses"])


@pytest.mark.parametrize(
    ("path", "name"),
    [("/api/runs/", "status"), ("/api/runs/", "agent"), ("/api/runs/", "created_by"), ("/api/runs/", "page"),
     ("/api/runs/{run_id}/checkpoints/", "include_sub_agents"), ("/api/runs/{run_id}/events/", "cursor")],
)
def test_optional_query_values_document_that_empty_means_absent(schema, path, name):
    documented = parameter(operation(schema, "get", path), name)
    assert documented["allowEmptyValue"] is True
    assert "An empty value is the same as leaving it out." in documented["description"]


# --------------------------------------------------------------------------- what the answers do


@pytest.fixture
def own_runs(api_user):
    for run_id in ("a", "b"):
        make_queued_run(run_id, user=api_user)


@pytest.mark.django_db
def test_empty_list_filters_are_ignored_like_absent_ones(api_client, own_runs):
    empty = api_client.get("/api/runs/?status=&agent=&created_by=&page=")
    assert empty.status_code == 200
    assert empty.json() == api_client.get("/api/runs/").json()


@pytest.mark.django_db
def test_an_empty_include_sub_agents_is_the_default(api_client, own_runs):
    assert api_client.get("/api/runs/a/checkpoints/?include_sub_agents=").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["yes", "1", "True", "0"])
def test_include_sub_agents_is_true_or_false_only(api_client, own_runs, value):
    response = api_client.get("/api/runs/a/checkpoints/", {"include_sub_agents": value})
    assert response.status_code == 400
    assert "include_sub_agents" in response.json()


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["0", "-1", "last", "x", "99"])
def test_a_page_that_does_not_exist_is_a_404_invalid_page(api_client, own_runs, page):
    response = api_client.get("/api/runs/", {"page": page})
    assert (response.status_code, response.json()["detail"]) == (404, "Invalid page.")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value"), [("agent", 5), ("run_id", 12345), ("messages", [{"role": "user", "content": 5}])]
)
def test_a_number_where_the_document_says_string_is_refused(api_client, field, value):
    body = {"agent": "reimbursement", "messages": [{"role": "user", "content": "hi"}], field: value}
    response = api_client.post("/api/runs/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()


@pytest.mark.django_db
def test_a_nul_in_message_text_is_refused_at_the_edge(api_client):
    body = {"agent": "reimbursement", "messages": [{"role": "user", "content": "a\x00b"}]}
    response = api_client.post("/api/runs/", body, format="json")
    assert response.status_code == 400
    assert response.json()["messages"]["0"]["content"] == ["Null characters are not allowed."]


@pytest.mark.django_db
def test_an_unknown_method_on_the_events_endpoint_is_a_405(api_client):
    api_client.raise_request_exception = False
    assert api_client.post("/api/runs/a/events/").status_code == 405


@pytest.mark.parametrize(("method", "path"), [
    (method, path) for path, item in {
        "/api/runs/{run_id}/effects/{operation_id}/resolve/": ["post"], "/api/metrics/": ["get"],
        "/api/effects/stop/": ["post"]}.items() for method in item])
def test_the_effect_ledgers_operations_document_their_401(schema, method, path):
    assert operation(schema, method, path)["responses"]["401"]["headers"]["WWW-Authenticate"]["schema"]["enum"] == [
        "Token"]


def test_the_events_endpoint_links_its_stream_to_the_part_union_with_an_example(schema):
    stream = operation(schema, "get", "/api/runs/{run_id}/events/")["responses"]["200"]["content"]["text/event-stream"]
    union = schema["components"]["schemas"]["StreamPart"]
    assert stream["schema"]["x-sse-data"]["$ref"].endswith("/StreamPart")
    assert union["discriminator"]["propertyName"] == "type"
    assert {"tool-approval-verdict", "cancelled", "retry", "recovery"} <= set(union["discriminator"]["mapping"])
    (example,) = stream["examples"].values()
    assert example["value"].startswith("retry: 1000\n")
