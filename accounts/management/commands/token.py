"""`manage.py token`: API tokens from the command line. `create USER --name NAME [--expires-in-days N]` prints
the new key, once, alone on standard output (`TOKEN=$(manage.py token create USER --name NAME)`); `list USER`
shows a user's tokens without keys; `revoke USER ID` revokes one. Keys are stored hashed (accounts.keys)."""

from __future__ import annotations

import argparse

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from accounts.errors import TokenNotFound
from accounts.selectors import token_list
from accounts.services import MAX_EXPIRES_IN_DAYS, token_create, token_revoke


def _days(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid whole number of days: {text!r}") from None
    if not 1 <= value <= MAX_EXPIRES_IN_DAYS:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_EXPIRES_IN_DAYS} days")
    return value


def _when(value) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value else "never"


class Command(BaseCommand):
    help = "Create, list and revoke a user's named API tokens (the key is printed once, at creation)."

    def add_arguments(self, parser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="{create,list,revoke}")
        create = actions.add_parser("create", help="make a token and print its key (once)")
        create.add_argument("username")
        create.add_argument("--name", required=True, help="what the token is for")
        create.add_argument("--expires-in-days", type=_days, default=None, help="its life (default: never expires)")
        listing = actions.add_parser("list", help="the user's tokens, without keys")
        listing.add_argument("username")
        revoke = actions.add_parser("revoke", help="revoke one of the user's tokens, by id")
        revoke.add_argument("username")
        revoke.add_argument("token_id", type=int)

    def handle(self, *args, action: str, username: str, **options) -> None:
        try:
            user = get_user_model().objects.get_by_natural_key(username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user {username!r}.") from None
        if action == "create":
            self._create(user, name=options["name"], expires_in_days=options["expires_in_days"])
        elif action == "list":
            self._list(user)
        else:
            self._revoke(user, token_id=options["token_id"])

    def _create(self, user, *, name: str, expires_in_days: int | None) -> None:
        try:
            issued = token_create(user=user, name=name, expires_in_days=expires_in_days)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(issued.key)
        self.stderr.write(f"Token {issued.token.pk} {issued.token.name!r} of {user.get_username()}, expires "
                          f"{_when(issued.token.expires_at)}. The key above is shown once: the server keeps only "
                          "its digest.")

    def _list(self, user) -> None:
        for token in token_list(user=user):
            self.stdout.write(f"{token.pk}\t{token.prefix}…\t{token.name}\tcreated {_when(token.created_at)}\t"
                              f"expires {_when(token.expires_at)}\tlast used {_when(token.last_used_at)}")

    def _revoke(self, user, *, token_id: int) -> None:
        try:
            token = token_revoke(user=user, token_id=token_id)
        except TokenNotFound as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Revoked token {token.pk} {token.name!r} ({token.prefix}…).")
