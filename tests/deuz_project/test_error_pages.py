"""Errors are plain pages that say why (no traceback), and JSON {"detail": ...} anywhere under /api/."""

from __future__ import annotations

import pytest
from django.test import Client, RequestFactory

from deuz_project import views

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(browser_for) -> Client:
    """Staff without a group: the admin, no run they may read."""
    return browser_for("staff")


def assert_plain_page(response, status: int, heading: str) -> str:
    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert f"<h1>{heading}</h1>" in html
    assert 'class="brand"' in html  # the site's own layout (base.html), not Django's bare page
    assert "Traceback" not in html and "File &quot;" not in html
    return html


@pytest.mark.parametrize("path", ["/api/nope/", "/api/runs/r1/nope/", "/api/", "/api/runs/r1/events/extra/"])
def test_an_unknown_api_path_answers_json_404(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Not found: no API endpoint or object at this path."}


@pytest.mark.parametrize("path", ["/api/nope/", "/api/runs/r1/approvals/", "/api/runs/r1/nope/extra/"])
def test_an_unknown_api_path_answers_json_404_with_debug_on_too(client, settings, path):
    settings.DEBUG = True  # ./scripts/dev: Django would answer its HTML debug page, not handler404
    response = client.get(path)
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found: no API endpoint or object at this path."}


def test_an_api_path_without_its_slash_is_served_rather_than_redirected(browser_for):
    response = browser_for("superuser").get("/api/runs")
    assert (response.status_code, response["Content-Type"], response.get("Location")) == (200, "application/json", None)


@pytest.mark.parametrize("path", ["/api/nope", "/api", "/api/runs/r1/nope"])
def test_an_unknown_api_path_without_a_slash_answers_json_404_with_debug_on(client, settings, path):
    settings.DEBUG = True
    response = client.post(path)
    assert (response.status_code, response["Content-Type"]) == (404, "application/json")


def test_an_unknown_page_answers_a_404_page_naming_the_path(client):
    html = assert_plain_page(client.get("/no-such-page/"), 404, "Not found")
    assert "Nothing is at <code>/no-such-page/</code>." in html


def test_a_missing_run_answers_a_404_page_saying_why(staff):
    html = assert_plain_page(staff.get("/runs/no-such-run/"), 404, "Not found")
    assert "/runs/no-such-run/" in html and "Resolver404" not in html


def test_a_page_the_user_may_not_see_answers_a_403_page_saying_why(browser_for):
    html = assert_plain_page(browser_for("plain").get("/console/"), 403, "Not allowed")
    assert "The console is for reviewers" in html and "pat does not have it" in html


def test_a_request_for_an_unknown_host_answers_a_400_page(client):
    html = assert_plain_page(client.get("/", HTTP_HOST="evil.example"), 400, "Bad request")
    assert "evil.example" not in html  # what Django's exception said stays in the log


def test_an_api_request_for_an_unknown_host_answers_json_400(client):
    response = client.get("/api/runs/", HTTP_HOST="evil.example")
    assert (response.status_code, response.json()) == (400, {"detail": "Bad request."})


def test_a_failed_csrf_check_answers_a_403_page_saying_nothing_was_recorded(browser_for):
    browser = browser_for("superuser", enforce_csrf_checks=True)
    html = assert_plain_page(browser.post("/console/r1/a1/", {"verdict": "approve"}), 403,
                             "This form could not be accepted")
    assert "nothing was recorded" in html


def test_a_server_error_answers_a_500_page_without_details(client, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("secret-detail-of-the-bug")

    monkeypatch.setattr(views, "render", broken)  # the home page's view fails
    client.raise_request_exception = False
    html = assert_plain_page(client.get("/"), 500, "Server error")
    assert "secret-detail-of-the-bug" not in html and "RuntimeError" not in html


def test_a_server_error_under_the_api_answers_json_500():
    response = views.server_error(RequestFactory().get("/api/runs/"))
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.content == b'{"detail": "Server error: the failure was logged."}'


def test_a_permission_error_under_the_api_outside_drf_answers_json_403():
    from django.core.exceptions import PermissionDenied

    response = views.permission_denied(RequestFactory().get("/api/runs/"), PermissionDenied("no"))
    assert response.status_code == 403
    assert response["Content-Type"] == "application/json"
