"""Production response headers: every page passes its Content-Security-Policy, and run data is never cached."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.csp import csp_policy, csp_problems

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("enforced_csp")]


@pytest.fixture
def root(browser_for, suspended) -> Client:
    """A superuser's browser: may open every page, the console and the admin included."""
    return browser_for("superuser")


PAGES = {
    "home": lambda request: "/",
    "admin index": lambda request: "/admin/",
    "admin run list": lambda request: "/admin/runs/run/?agent=reimbursement",
    "admin run": lambda request: f"/admin/runs/run/{request.run.pk}/change/",
    "admin approval list": lambda request: "/admin/approvals/approvalrequest/",
    "admin approval": lambda request: f"/admin/approvals/approvalrequest/{request.pk}/change/",
    "swagger ui": lambda request: "/api/docs/",
    "console queue": lambda request: "/console/",
    "console request": lambda request: f"/console/r1/{request.approval_id}/",
    "run list": lambda request: "/runs/",
    "run timeline": lambda request: "/runs/r1/",
    "live transcript": lambda request: "/runs/r1/live/",
    "404 page": lambda request: "/runs/no-such-run/",
}


@pytest.mark.parametrize("page", PAGES)
def test_every_page_passes_its_content_security_policy(root, suspended, page):
    response = root.get(PAGES[page](suspended))
    assert response.status_code == (404 if page == "404 page" else 200)
    assert csp_problems(response) == []


def test_the_admin_login_page_passes_its_content_security_policy(client):
    response = client.get("/admin/login/")
    assert response.status_code == 200
    assert csp_problems(response) == []


def test_the_policy_allows_no_inline_code_eval_plugins_or_framing(root):
    policy = csp_policy(root.get("/runs/"))
    assert policy["default-src"] == ["'self'"]
    for directive in ("script-src", "style-src"):
        assert "'unsafe-inline'" not in policy[directive] and "'unsafe-eval'" not in policy[directive]
        assert "*" not in policy[directive]
    assert policy["object-src"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]


def test_each_page_gets_its_own_nonce(root, suspended):
    first, second = (csp_policy(root.get("/api/docs/"))["script-src"] for _ in range(2))
    assert first != second and any(source.startswith("'nonce-") for source in first)


def test_swagger_ui_carries_the_nonce_on_its_inline_init_script(root):
    response = root.get("/api/docs/")
    nonce = next(source for source in csp_policy(response)["script-src"] if source.startswith("'nonce-"))
    assert f'<script nonce="{nonce[7:-1]}">' in response.content.decode()
    assert "SwaggerUIBundle(" in response.content.decode()


def test_swagger_ui_sends_the_schema_to_no_validator(root):
    assert '"validatorUrl": null' in root.get("/api/docs/").content.decode()


def no_store(response) -> bool:
    directives = {part.strip() for part in response.headers.get("Cache-Control", "").split(",")}
    return {"private", "no-store"} <= directives


@pytest.mark.parametrize(
    "path",
    ["/", "/runs/", "/runs/r1/", "/runs/r1/live/", "/console/", "/admin/runs/run/", "/api/docs/", "/api/schema/",
     "/runs/no-such-run/"],
)
def test_pages_are_private_and_never_stored(root, path):
    assert no_store(root.get(path))


@pytest.mark.parametrize("path", ["/api/runs/", "/api/runs/r1/", "/api/runs/r1/checkpoints/", "/api/runs/nope/"])
def test_api_answers_are_private_and_never_stored(root, path):
    response = root.get(path)
    assert response["Content-Type"] == "application/json"
    assert no_store(response)


def test_api_refusals_are_private_and_never_stored(client):
    assert no_store(client.get("/api/runs/"))  # 401: no credentials


def test_the_event_stream_keeps_the_caching_its_view_chose(root):
    response = root.get("/api/runs/r1/events/")
    assert response["Content-Type"] == "text/event-stream"
    assert response["Cache-Control"] == "private, no-store"
    response.close()


def test_static_files_keep_their_own_caching(settings):
    settings.WHITENOISE_USE_FINDERS = True  # serve from the apps' folders, as collectstatic would have them
    settings.WHITENOISE_AUTOREFRESH = True
    response = Client().get("/static/deuz/base.css")
    assert response.status_code == 200
    assert "public" in response["Cache-Control"] and "no-store" not in response["Cache-Control"]
    response.close()


def test_the_run_pages_stylesheet_is_served(settings):
    settings.WHITENOISE_USE_FINDERS = True
    settings.WHITENOISE_AUTOREFRESH = True
    for path in ("/static/deuz/base.css", "/static/vendor/pico/pico.classless.min.css", "/static/runs/live.js"):
        response = Client().get(path)
        assert response.status_code == 200, path
        response.close()



async def test_under_asgi_pages_are_private_and_never_stored(async_client):
    response = await async_client.get("/")
    assert response.status_code == 200 and no_store(response)


def test_with_the_https_redirect_on_pages_redirect_but_the_health_probe_answers(settings, client):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/runs/").headers["Location"] == "https://testserver/runs/"
    assert client.get("/healthz").status_code == 200  # load balancers probe over plain HTTP


def test_behind_the_proxy_a_forwarded_https_request_is_secure_and_gets_hsts(settings, client):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    response = client.get("/", HTTP_X_FORWARDED_PROTO="https")
    assert response.status_code == 200  # not redirected: the proxy said HTTPS
    assert response["Strict-Transport-Security"].startswith("max-age=31536000")
