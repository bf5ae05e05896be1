"""A NUL character in a path, a query parameter or a page's form field is refused at the edge with a 400.

PostgreSQL cannot hold or compare text with NUL (a lookup raises DataError, which was a 500); the refusal
comes before sessions, users or views, so it opens no query on either database.
"""

from __future__ import annotations

import pytest
from django.test import Client

from approvals.models import ApprovalRequest
from tests.csp import csp_problems
from tests.factories import make_suspended_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def staff(browser_for) -> Client:
    return browser_for("superuser")


@pytest.mark.parametrize(
    "path",
    ["/runs/%00/", "/runs/%00/live/", "/console/%00/x/", "/console/r1/%00/", "/runs/r%001/", "/%00"],
)
def test_a_nul_in_a_page_path_answers_a_400_page_without_touching_the_database(
    staff, django_assert_num_queries, path
):
    with django_assert_num_queries(0):
        response = staff.get(path)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert "The path contains a NUL character (%00)" in response.content.decode()


@pytest.mark.parametrize(
    "path", ["/api/runs/%00/", "/api/runs/%00/events/", "/api/runs/r1/approvals/%00/", "/api/runs/%00/cancel/"]
)
def test_a_nul_in_an_api_path_answers_json_400_without_touching_the_database(
    staff, django_assert_num_queries, path
):
    with django_assert_num_queries(0):
        response = staff.get(path)
    assert response.status_code == 400
    assert response.json() == {
        "detail": "The path contains a NUL character (%00), which no run id, name, filter or text may hold."
    }


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/admin/runs/run/", {"agent": "\x00"}),
        ("/admin/runs/run/", {"q": "exp\x00-1042"}),
        ("/runs/", {"status": "\x00"}),
        ("/runs/r1/live/", {"transport": "sse\x00"}),
    ],
)
def test_a_nul_in_a_page_query_parameter_names_it_in_a_400_page(staff, django_assert_num_queries, path, query):
    with django_assert_num_queries(0):
        response = staff.get(path, query)
    assert response.status_code == 400
    assert f"The query parameter &#x27;{next(iter(query))}&#x27; contains a NUL" in response.content.decode()


@pytest.mark.parametrize("query", [{"agent": "\x00"}, {"status": "running\x00"}, {"page": "1\x00"}])
def test_a_nul_in_an_api_query_parameter_answers_json_400(staff, django_assert_num_queries, query):
    with django_assert_num_queries(0):
        response = staff.get("/api/runs/", query)
    assert response.status_code == 400
    assert response.json()["detail"].startswith(f"The query parameter {next(iter(query))!r} contains a NUL")


def test_a_nul_in_a_query_parameter_name_is_refused_without_echoing_it(staff):
    response = staff.get("/api/runs/?ag%00ent=x")
    assert response.status_code == 400
    assert response.json()["detail"].startswith("A query parameter contains a NUL")


def test_an_anonymous_request_with_a_nul_is_refused_before_the_login_redirect(client):
    assert client.get("/runs/%00/").status_code == 400


def test_a_nul_in_a_console_reason_is_refused_and_nothing_is_decided(drain_runs, browser_for):
    request = make_suspended_run(drain_runs, "r1")
    response = browser_for("reviewer").post(f"/console/r1/{request.approval_id}/", {"verdict": "deny", "reason": "no\x00pe"})
    assert response.status_code == 400
    assert "The form field &#x27;reason&#x27; contains a NUL" in response.content.decode()
    assert ApprovalRequest.objects.get(pk=request.pk).status == "pending"


def test_a_nul_in_an_admin_login_field_is_refused(client, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.post("/admin/login/", {"username": "ro\x00ot", "password": "x"})
    assert response.status_code == 400


def test_the_refusal_page_passes_the_content_security_policy(client, enforced_csp):
    response = client.get("/runs/%00/")
    assert response.status_code == 400 and csp_problems(response) == []


def test_a_query_without_nul_goes_through(staff):
    assert staff.get("/api/runs/", {"agent": "reimbursement"}).status_code == 200


async def test_under_asgi_a_nul_in_a_page_path_answers_a_400_page(async_client):
    response = await async_client.get("/runs/%00/live/")
    assert response.status_code == 400
    assert "The path contains a NUL character (%00)" in response.content.decode()


async def test_under_asgi_a_nul_in_an_api_query_parameter_answers_json_400(async_client):
    response = await async_client.get("/api/runs/", {"agent": "\x00"})
    assert response.status_code == 400
    assert response.json()["detail"].startswith("The query parameter 'agent' contains a NUL")


@pytest.mark.parametrize("path", ["/api/runs/", "/runs/"])
def test_a_nul_in_the_authorization_header_is_refused_before_the_token_lookup(django_assert_num_queries, path):
    with django_assert_num_queries(0):
        response = Client().get(path, HTTP_AUTHORIZATION="Token a\x00b")
    assert (response.status_code, "Authorization header contains a NUL" in response.content.decode()) == (400, True)


def test_a_nul_in_a_cookie_is_refused_before_the_session_lookup(django_assert_num_queries):
    client = Client()
    client.cookies["sessionid"] = "abc\x00def"
    with django_assert_num_queries(0):
        response = client.get("/runs/")
    assert response.status_code == 400
