"""The admin's API tokens: listed by name, user and prefix, never with a digest or a key; revoked by an action
that calls token_revoke; never added there (a key exists only when its owner makes it)."""

from __future__ import annotations

import pytest

from accounts.models import ApiToken
from accounts.services import token_create
from tests.accounts.conftest import key_client

pytestmark = pytest.mark.django_db


def test_the_list_shows_tokens_without_their_digest(admin_client, ada):
    issued = token_create(user=ada, name="laptop")
    html = admin_client.get("/admin/accounts/apitoken/").content.decode()
    assert "laptop" in html and f"{issued.token.prefix}…" in html
    assert issued.token.digest not in html and issued.key not in html


def test_the_detail_shows_no_digest(admin_client, ada):
    token = token_create(user=ada, name="laptop").token
    html = admin_client.get(f"/admin/accounts/apitoken/{token.pk}/change/").content.decode()
    assert "laptop" in html and token.digest not in html


def test_the_revoke_action_ends_the_tokens(admin_client, ada):
    issued = token_create(user=ada, name="laptop")
    admin_client.post("/admin/accounts/apitoken/", {"action": "revoke_selected", "_selected_action": [issued.token.pk]})
    assert ApiToken.objects.get().revoked_at is not None
    assert key_client(issued.key).get("/api/tokens/").status_code == 401


def test_no_token_is_added_in_the_admin(admin_client):
    assert admin_client.get("/admin/accounts/apitoken/add/").status_code == 403
