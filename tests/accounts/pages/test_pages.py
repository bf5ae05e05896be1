"""/account/tokens/: a signed-in user makes a token (its key shown once, on the answer to the form), sees their
tokens without keys, and revokes one after confirming; another user's token is a 404; anonymous visitors are sent
to sign in."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from accounts.models import ApiToken
from accounts.services import token_create
from tests.accounts.conftest import key_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(ada) -> Client:
    client = Client()
    client.force_login(ada)
    return client


def shown_key(html: str) -> str | None:
    found = re.search(r'id="new-token-key" type="text" value="([^"]+)"', html)
    return found and found.group(1)


def test_an_anonymous_visitor_is_sent_to_sign_in(db):
    response = Client().get("/account/tokens/")
    assert (response.status_code, response.url) == (302, "/accounts/login/?next=/account/tokens/")


def test_making_a_token_shows_its_key_once(browser):
    html = browser.post("/account/tokens/", {"name": "laptop", "expires_in_days": ""}).content.decode()
    key = shown_key(html)
    assert key and key_client(key).get("/api/tokens/").status_code == 200
    assert "Copy the key now" in html
    assert key not in browser.get("/account/tokens/").content.decode()


def test_the_list_shows_each_token_by_name_and_prefix_without_its_key(browser, ada):
    issued = token_create(user=ada, name="laptop")
    html = browser.get("/account/tokens/").content.decode()
    assert "laptop" in html and f"{issued.token.prefix}…" in html and issued.key not in html


def test_the_page_lists_only_the_users_own_tokens(browser, bob):
    token_create(user=bob, name="bob's machine")
    assert "bob&#x27;s machine" not in browser.get("/account/tokens/").content.decode()


def test_a_form_that_is_not_valid_says_why_and_makes_no_token(browser):
    response = browser.post("/account/tokens/", {"name": "", "expires_in_days": "0"})
    html = response.content.decode()
    assert response.status_code == 400 and "No token was made" in html and 'id="id_name-errors"' in html
    assert not ApiToken.objects.exists()


def test_the_expiry_is_set_from_the_form(browser):
    browser.post("/account/tokens/", {"name": "laptop", "expires_in_days": "30"})
    token = ApiToken.objects.get()
    assert (token.expires_at - token.created_at).days == 30


def test_making_a_token_needs_the_csrf_token(ada):
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)
    assert client.post("/account/tokens/", {"name": "laptop"}).status_code == 403
    assert not ApiToken.objects.exists()


def test_revoking_asks_to_confirm_first(browser, ada):
    issued = token_create(user=ada, name="laptop")
    html = browser.get(f"/account/tokens/{issued.token.pk}/revoke/").content.decode()
    assert "Revoke “laptop”?" in html and '<form method="post">' in html
    assert key_client(issued.key).get("/api/tokens/").status_code == 200


def test_confirming_revokes_the_token_and_says_so(browser, ada):
    issued = token_create(user=ada, name="laptop")
    response = browser.post(f"/account/tokens/{issued.token.pk}/revoke/", follow=True)
    html = response.content.decode()
    assert response.redirect_chain == [("/account/tokens/", 302)] and "is revoked" in html
    assert key_client(issued.key).get("/api/tokens/").status_code == 401
    assert "You have no API tokens." in html


@pytest.mark.parametrize("method", ["get", "post"])
def test_another_users_token_is_a_404(browser, bob, method):
    issued = token_create(user=bob, name="bob's")
    assert getattr(browser, method)(f"/account/tokens/{issued.token.pk}/revoke/").status_code == 404
    assert key_client(issued.key).get("/api/tokens/").status_code == 200


@pytest.mark.parametrize("token_id", ["999", str(2**63)])
def test_an_unknown_token_is_a_404(browser, token_id):
    assert browser.get(f"/account/tokens/{token_id}/revoke/").status_code == 404


def test_each_token_has_a_revoke_button(browser, ada):
    token = token_create(user=ada, name="laptop").token
    html = browser.get("/account/tokens/").content.decode()
    assert f'action="/account/tokens/{token.pk}/revoke/"' in html and "Revoke…</button>" in html


@pytest.mark.parametrize("role", ["plain", "support", "reviewer", "staff", "superuser"])
def test_every_signed_in_role_finds_the_page_in_the_header(browser_for, role):
    client = browser_for(role)
    header = client.get("/").content.decode().split("</header>", 1)[0]
    account = client.get("/account/")
    assert 'href="/account/"' in header and account.status_code == 200
    assert 'href="/account/tokens/"' in account.content.decode()


def test_the_header_of_an_anonymous_visitor_has_no_token_link(client, db):
    assert 'href="/account/' not in client.get("/").content.decode()
