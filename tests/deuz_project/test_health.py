"""The public surface that needs no login: health probe, API schema and docs; admin asks for one."""

from __future__ import annotations

import pytest
from django.db import OperationalError, connection


@pytest.mark.django_db
def test_healthz_answers_ok_when_the_database_answers(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_healthz_answers_503_json_when_the_database_is_unreachable(client, monkeypatch):
    def unreachable(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(connection, "cursor", unreachable)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"


def test_schema_is_readable_anonymously(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    assert response.json()["info"]["title"] == "Deuz API"


def test_docs_render_anonymously_from_local_assets(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in html  # no CDN: works offline


@pytest.mark.django_db
def test_admin_redirects_anonymous_users_to_login(client):
    response = client.get("/admin/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_home_page_links_admin_and_api_docs(client):
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'href="/admin/"' in html
    assert 'href="/api/docs/"' in html
