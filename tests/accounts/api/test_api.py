"""The tokens API: a user creates named tokens whose key is shown once, lists them without keys, and revokes
their own; another user's token is a 404; nothing but a digest of a key is stored."""

from __future__ import annotations

import hashlib

import pytest
from django.forms.models import model_to_dict
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.services import token_create
from tests.accounts.conftest import key_client

pytestmark = pytest.mark.django_db


def create(client, **body):
    return client.post("/api/tokens/", {"name": "ci", **body}, format="json")


def test_create_answers_the_key_once_with_the_token(session_api):
    response = create(session_api, name="laptop")
    body = response.json()
    assert response.status_code == 201
    assert body["name"] == "laptop" and body["key"].startswith(body["prefix"]) and body["expires_at"] is None
    assert set(body) == {"id", "name", "prefix", "created_at", "expires_at", "last_used_at", "key"}


def test_the_list_never_shows_a_key(session_api):
    key = create(session_api).json()["key"]
    response = session_api.get("/api/tokens/")
    assert response.status_code == 200 and response.json()["count"] == 1
    assert "key" not in response.json()["results"][0] and key not in response.content.decode()


def test_the_database_holds_a_digest_and_never_the_key(session_api):
    key = create(session_api).json()["key"]
    stored = [str(value) for token in ApiToken.objects.all() for value in model_to_dict(token).values()]
    assert not [value for value in stored if key in value]
    assert ApiToken.objects.get().digest == hashlib.sha256(key.encode()).hexdigest()


def test_expires_in_days_sets_the_expiry(session_api):
    body = create(session_api, expires_in_days=30).json()
    token = ApiToken.objects.get(pk=body["id"])
    assert (token.expires_at - token.created_at).days == 30


@pytest.mark.parametrize("body", [
    {}, {"name": ""}, {"name": "x" * 101}, {"name": 5}, {"name": "a\x00b"}, {"name": "ci", "expires_in_days": 0},
    {"name": "ci", "expires_in_days": 3651}, {"name": "ci", "expires_in_days": "30"},
    {"name": "ci", "expires_in_days": True}, {"name": "ci", "scopes": ["all"]},
])
def test_a_body_that_is_not_valid_is_a_400_with_field_errors_and_makes_no_token(session_api, body):
    response = session_api.post("/api/tokens/", body, format="json")
    assert response.status_code == 400 and "detail" in response.json()
    assert not ApiToken.objects.exists()


def test_the_list_has_only_the_users_own_unrevoked_tokens(session_api, ada, bob):
    token_create(user=bob, name="bob's")
    mine = token_create(user=ada, name="mine").token
    gone = token_create(user=ada, name="gone").token
    session_api.delete(f"/api/tokens/{gone.pk}/")
    assert [row["id"] for row in session_api.get("/api/tokens/").json()["results"]] == [mine.pk]


def test_a_support_user_lists_only_their_own_tokens(users):
    token_create(user=users["owner"], name="olga's")
    client = key_client(token_create(user=users["support"], name="sue's").key)
    assert [row["name"] for row in client.get("/api/tokens/").json()["results"]] == ["sue's"]


def test_revoke_answers_204_and_the_token_is_refused_from_then_on(session_api, ada):
    issued = token_create(user=ada, name="ci")
    assert key_client(issued.key).get("/api/tokens/").status_code == 200
    assert session_api.delete(f"/api/tokens/{issued.token.pk}/").status_code == 204
    response = key_client(issued.key).get("/api/tokens/")
    assert (response.status_code, response.json()) == (401, {"detail": "Invalid token."})


def test_a_token_may_revoke_itself(ada):
    issued = token_create(user=ada, name="ci")
    client = key_client(issued.key)
    assert client.delete(f"/api/tokens/{issued.token.pk}/").status_code == 204
    assert client.get("/api/tokens/").status_code == 401


def test_another_users_token_is_a_404_and_keeps_working(session_api, bob):
    issued = token_create(user=bob, name="bob's")
    response = session_api.delete(f"/api/tokens/{issued.token.pk}/")
    assert response.status_code == 404 and response.json()["detail"]
    assert key_client(issued.key).get("/api/tokens/").status_code == 200


@pytest.mark.parametrize("token_id", ["999", str(2**63), str(10**30), "0"])
def test_an_unknown_token_id_is_a_json_404(session_api, token_id):
    response = session_api.delete(f"/api/tokens/{token_id}/")
    assert response.status_code == 404 and "detail" in response.json()


def test_revoking_twice_is_a_404(session_api, ada):
    token = token_create(user=ada, name="ci").token
    session_api.delete(f"/api/tokens/{token.pk}/")
    assert session_api.delete(f"/api/tokens/{token.pk}/").status_code == 404


@pytest.mark.parametrize(("method", "path"), [("get", "/api/tokens/"), ("post", "/api/tokens/"),
                                              ("delete", "/api/tokens/1/")])
def test_without_credentials_every_tokens_endpoint_is_a_401_asking_for_a_token(method, path):
    response = getattr(APIClient(), method)(path, format="json")
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"


def test_a_session_post_without_its_csrf_token_is_refused(ada):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(ada)
    response = create(client)
    assert response.status_code == 403 and not ApiToken.objects.exists()



@pytest.mark.parametrize("token_id", ["abc", "null,null", "1.5", "-1", "\u0661"])
def test_an_id_that_is_no_whole_number_is_a_json_404(session_api, token_id):
    response = session_api.delete(f"/api/tokens/{token_id}/")
    assert (response.status_code, response["Content-Type"]) == (404, "application/json")


def test_a_session_delete_without_its_csrf_token_is_a_json_403_whatever_the_id(ada):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(ada)
    response = client.delete("/api/tokens/null,null/")
    assert (response.status_code, response["Content-Type"]) == (403, "application/json")
