"""`manage.py token`: create prints a new hashed, named token's key once and alone on standard output; list shows
a user's tokens without keys; revoke ends one."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from accounts.models import ApiToken
from accounts.services import token_create
from tests.accounts.conftest import key_client

pytestmark = pytest.mark.django_db


def token_cli(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_create_prints_only_the_key_and_the_key_authenticates(ada):
    out, _ = token_cli("create", "ada", "--name", "deploy")
    key = out.strip()
    assert out == key + "\n" and key.startswith("deuz_")
    response = key_client(key, "Bearer").get("/api/tokens/")
    assert [row["name"] for row in response.json()["results"]] == ["deploy"]


def test_create_stores_a_digest_and_says_the_key_is_shown_once(ada):
    out, err = token_cli("create", "ada", "--name", "deploy")
    assert ApiToken.objects.get().digest != out.strip() and out.strip() not in err
    assert "shown once" in err


def test_create_sets_the_expiry(ada):
    token_cli("create", "ada", "--name", "deploy", "--expires-in-days", "7")
    token = ApiToken.objects.get()
    assert (token.expires_at - token.created_at).days == 7


@pytest.mark.parametrize("days", ["0", "3651", "soon"])
def test_create_refuses_an_expiry_out_of_range(ada, days):
    with pytest.raises(CommandError):
        token_cli("create", "ada", "--name", "deploy", "--expires-in-days", days)
    assert not ApiToken.objects.exists()


def test_create_needs_a_name(ada):
    with pytest.raises(CommandError, match="--name"):
        token_cli("create", "ada")


def test_an_unknown_user_is_an_error(db):
    with pytest.raises(CommandError, match="No user 'nobody'"):
        token_cli("create", "nobody", "--name", "deploy")


def test_list_shows_prefixes_never_keys(ada):
    issued = token_create(user=ada, name="deploy")
    out, _ = token_cli("list", "ada")
    assert issued.token.prefix in out and "deploy" in out and issued.key not in out


def test_revoke_ends_the_token(ada):
    issued = token_create(user=ada, name="deploy")
    out, _ = token_cli("revoke", "ada", str(issued.token.pk))
    assert "Revoked" in out and key_client(issued.key).get("/api/tokens/").status_code == 401


def test_revoke_refuses_another_users_token(ada, bob):
    issued = token_create(user=bob, name="bob's")
    with pytest.raises(CommandError):
        token_cli("revoke", "ada", str(issued.token.pk))
    assert key_client(issued.key).get("/api/tokens/").status_code == 200
