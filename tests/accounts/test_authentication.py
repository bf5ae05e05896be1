"""`Authorization: Token KEY` and `Authorization: Bearer KEY` authenticate the REST API as the token's user; an
unknown, revoked or expired key, or one of an inactive user, is a 401 in JSON; other schemes are left to the
session."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.services import token_create, token_revoke
from tests.accounts.conftest import key_client

pytestmark = pytest.mark.django_db


def whoami(client: APIClient) -> list[str]:
    """Whose tokens the client lists: the user it authenticates as."""
    response = client.get("/api/tokens/")
    assert response.status_code == 200, response.content
    return [row["name"] for row in response.json()["results"]]


@pytest.mark.parametrize("scheme", ["Token", "Bearer", "bearer", "TOKEN"])
def test_the_key_authenticates_in_either_scheme(ada, scheme):
    issued = token_create(user=ada, name="ada's")
    assert whoami(key_client(issued.key, scheme)) == ["ada's"]


def test_a_key_authenticates_its_own_user_among_several(ada, bob):
    token_create(user=ada, name="ada's")
    bobs = token_create(user=bob, name="bob's")
    assert whoami(key_client(bobs.key, "Bearer")) == ["bob's"]


def refusal(client: APIClient) -> tuple[int, dict, str]:
    response = client.get("/api/runs/")
    return response.status_code, response.json(), response["WWW-Authenticate"]


@pytest.mark.parametrize("scheme", ["Token", "Bearer"])
def test_an_expired_token_is_refused(ada, scheme):
    issued = token_create(user=ada, name="ci", expires_in_days=1)
    ApiToken.objects.filter(pk=issued.token.pk).update(expires_at=timezone.now() - datetime.timedelta(seconds=1))
    assert refusal(key_client(issued.key, scheme)) == (401, {"detail": "Token has expired."}, "Token")


def test_a_token_not_yet_expired_authenticates(ada):
    issued = token_create(user=ada, name="ci", expires_in_days=1)
    assert whoami(key_client(issued.key)) == ["ci"]


@pytest.mark.parametrize("scheme", ["Token", "Bearer"])
def test_a_revoked_token_is_refused(ada, scheme):
    issued = token_create(user=ada, name="ci")
    token_revoke(user=ada, token_id=issued.token.pk)
    assert refusal(key_client(issued.key, scheme)) == (401, {"detail": "Invalid token."}, "Token")


def test_an_inactive_users_token_is_refused(ada):
    issued = token_create(user=ada, name="ci")
    ada.is_active = False
    ada.save()
    assert refusal(key_client(issued.key))[:2] == (401, {"detail": "User inactive or deleted."})


@pytest.mark.parametrize("header", [
    "Bearer", "Token", "Bearer a b", "Bearer not-a-key", "Token " + "x" * 5000, "Bearer deuz_" + "A" * 43,
])
def test_a_token_header_that_does_not_verify_is_a_401(db, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    status, body, challenge = refusal(client)
    assert (status, challenge) == (401, "Token") and body["detail"].startswith("Invalid token")


def test_the_prefix_alone_does_not_authenticate(ada):
    issued = token_create(user=ada, name="ci")
    assert refusal(key_client(issued.token.prefix))[0] == 401


def test_a_bad_token_does_not_fall_back_to_the_session(ada):
    client = APIClient()
    client.force_login(ada)
    client.credentials(HTTP_AUTHORIZATION="Bearer not-a-key")
    assert refusal(client)[0] == 401


def test_another_scheme_is_left_to_the_session(ada):
    client = APIClient()
    client.force_login(ada)
    client.credentials(HTTP_AUTHORIZATION="Basic YWRhOnB3")
    token_create(user=ada, name="ada's")
    assert whoami(client) == ["ada's"]


def test_use_is_recorded_as_last_used(ada):
    issued = token_create(user=ada, name="ci")
    before = timezone.now()
    whoami(key_client(issued.key))
    issued.token.refresh_from_db()
    assert issued.token.last_used_at is not None and issued.token.last_used_at >= before


def test_last_used_is_written_at_most_once_a_minute(ada):
    issued = token_create(user=ada, name="ci")
    client = key_client(issued.key)
    whoami(client)
    recorded = ApiToken.objects.get().last_used_at
    whoami(client)
    assert ApiToken.objects.get().last_used_at == recorded


def test_a_key_reaches_no_log_line_nor_any_query(ada, settings, caplog):
    import logging

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.DEBUG = True  # Django logs every query, with its parameters, at DEBUG
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="django")
    with CaptureQueriesContext(connection) as queries:
        issued = token_create(user=ada, name="ci")
        whoami(key_client(issued.key, "Bearer"))
        token_revoke(user=ada, token_id=issued.token.pk)
        assert refusal(key_client(issued.key))[0] == 401
    assert len(queries) > 3 and not [query for query in queries if issued.key in query["sql"]]
    assert issued.token.digest in caplog.text and issued.key not in caplog.text
