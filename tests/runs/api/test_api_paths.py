"""Every path under /api/ answers JSON, for every method, with or without its trailing slash (issue 22).

The routes are read from the URLconf, so an endpoint added later is walked too. Two answers are not JSON by design:
the Swagger UI page (GET /api/docs/, a page people read) and the event stream (GET .../events/).
"""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from runs.models import Run
from tests.factories import make_queued_run, make_user, token_of

pytestmark = pytest.mark.django_db

METHODS = ["get", "post", "put", "patch", "delete", "options", "head"]
#: The two answers under /api/ that are not JSON, by method and route.
NOT_JSON = {("get", "/api/docs/"): "text/html", ("head", "/api/docs/"): "text/html",
            ("get", "/api/runs/{run_id}/events/"): "text/event-stream"}
START = {"agent": "reimbursement", "messages": [{"role": "user", "content": "Please reimburse exp-1042."}]}


def api_routes() -> list[str]:
    """Every route of the URLconf under /api/, its parameters as {name}; the catch-all's regex left out."""
    routes = []

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern) and route.startswith("api/") and not route.startswith("^"):
                routes.append("/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route))

    walk(get_resolver().url_patterns, "")
    return sorted(set(routes))


def test_the_walk_finds_the_api_routes():
    # A walk that found nothing would make every test below pass by testing nothing.
    assert {"/api/runs/", "/api/runs/{run_id}/", "/api/runs/{run_id}/events/", "/api/tokens/", "/api/webhooks/",
            "/api/schema/", "/api/docs/"} <= set(api_routes())


@pytest.fixture
def clients(db):
    """A token client and a signed-in browser session that enforces CSRF, as the same user, with a run of theirs."""
    user = make_user("ada")
    make_queued_run("r1", user=user)
    by_token = APIClient()
    by_token.credentials(HTTP_AUTHORIZATION=f"Token {token_of(user)}")
    by_session = Client(enforce_csrf_checks=True)
    by_session.force_login(user)
    for client in (by_token, by_session):
        client.raise_request_exception = False
    return {"token": by_token, "session": by_session}


def ask(client, method: str, path: str):
    body = {"data": "{}", "content_type": "application/json"} if method in ("post", "put", "patch") else {}
    return getattr(client, method)(path, **body)


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
@pytest.mark.parametrize("kind", ["token", "session"])
def test_every_api_route_answers_json_for_every_method_with_and_without_its_slash(clients, settings, kind, debug):
    settings.DEBUG = debug  # ./scripts/dev: where Django would answer its HTML debug pages
    wrong = []
    for route in api_routes():
        path = route.replace("{run_id}", "r1").replace("{", "").replace("}", "")  # other ids: unknown ones
        for method in METHODS:
            for written in (path, path.rstrip("/")):
                response = ask(clients[kind], method, written)
                expected = NOT_JSON.get((method, route), "application/json")
                content_type = response.get("Content-Type", "")
                if response.status_code >= 500 or not (
                    content_type.startswith(expected) or expected == "application/json" and "+json" in content_type
                ):
                    wrong.append(f"{method.upper()} {written}: {response.status_code} {content_type}")
    assert wrong == []


@pytest.mark.parametrize("method", METHODS)
def test_a_path_without_its_slash_gets_the_same_answer_as_with_it(clients, method):
    for route in api_routes():
        path = route.replace("{run_id}", "r1").replace("{", "").replace("}", "")
        if method in ("post", "put", "patch", "delete") and route.endswith("/cancel/"):
            continue  # the first cancel changes what the second answers
        with_slash, without = ask(clients["token"], method, path), ask(clients["token"], method, path.rstrip("/"))
        assert (without.status_code, without.get("Location")) == (with_slash.status_code, None), path


def test_a_post_without_the_trailing_slash_starts_a_run(clients):
    response = clients["token"].post("/api/runs", START, format="json")
    assert response.status_code == 201, response.content
    assert Run.objects.filter(run_id=response.json()["run_id"]).exists()


def test_a_post_without_the_trailing_slash_under_debug_starts_a_run_rather_than_a_500(clients, settings):
    settings.DEBUG = True  # Django's APPEND_SLASH raised a RuntimeError here: it cannot redirect a POST's body
    response = clients["token"].post("/api/runs", START, format="json")
    assert response.status_code == 201, response.content


@pytest.mark.parametrize("path", ["/api/runs/r1/messages/", "/api/nope", "/api/nope/", "/api"])
def test_a_session_post_to_an_unknown_path_is_a_json_404_not_a_csrf_page(clients, path):
    response = clients["session"].post(path, {}, content_type="application/json")
    assert (response.status_code, response["Content-Type"]) == (404, "application/json")


def test_a_session_post_without_its_csrf_token_is_a_json_403(clients):
    response = clients["session"].post("/api/runs", START, content_type="application/json")
    assert (response.status_code, response["Content-Type"]) == (403, "application/json")
    assert "CSRF" in response.json()["detail"]


def test_a_csrf_failure_outside_drf_under_the_api_answers_json(rf):
    from deuz_project.views import csrf_failure

    response = csrf_failure(rf.post("/api/runs/r1/events/"), reason="CSRF token missing.")
    assert (response.status_code, response["Content-Type"]) == (403, "application/json")
    assert json.loads(response.content) == {"detail": "CSRF Failed: CSRF token missing."}


def test_a_browser_asking_for_html_gets_json_not_the_browsable_api(clients):
    response = clients["token"].get("/api/runs/", HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
    assert (response.status_code, response["Content-Type"]) == (200, "application/json")


def test_only_html_accepted_is_a_json_406(clients):
    response = clients["token"].get("/api/runs/", HTTP_ACCEPT="text/html")
    assert (response.status_code, response["Content-Type"]) == (406, "application/json")


def test_the_schema_is_json_unless_yaml_is_asked_for(client):
    assert client.get("/api/schema/")["Content-Type"].startswith("application/vnd.oai.openapi+json")
    yaml = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi")
    assert yaml["Content-Type"].startswith("application/vnd.oai.openapi") and yaml.content.startswith(b"openapi:")


def test_a_method_the_docs_page_does_not_serve_is_a_json_405(client):
    for method in ("post", "delete", "options"):
        response = getattr(client, method)("/api/docs/")
        assert (response.status_code, response["Content-Type"]) == (405, "application/json"), method
