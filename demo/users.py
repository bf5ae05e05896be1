"""The demo users of `manage.py serve` in DEBUG: one per role, their passwords kept in a file so they survive a
database reset and stay the same across restarts."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser
from django.db import transaction

from approvals.roles import REVIEWERS_GROUP, SUPPORT_GROUP
from approvals.services import role_group_ensure

__all__ = ["DEMO_ROLES", "DemoLogin", "DemoRole", "demo_users_ensure"]


@dataclass(frozen=True)
class DemoRole:
    """One demo account of `manage.py serve` in DEBUG: its username, role, groups, and where its work is."""

    username: str
    role: str
    groups: tuple[str, ...] = ()
    is_staff: bool = False
    is_superuser: bool = False
    goes_to: str = "/runs/"
    does: str = ""


#: One demo user per role, in the order `manage.py serve` prints them.
DEMO_ROLES = (
    DemoRole("api-user", "plain API user", goes_to="/runs/",
             does="starts runs through the API and reads, follows and cancels its own"),
    DemoRole("support", "support", groups=(SUPPORT_GROUP,), is_staff=True, goes_to="/runs/",
             does="reads every run and its timeline (and the admin's records); decides nothing"),
    DemoRole("reviewer", "reviewer", groups=(REVIEWERS_GROUP,), is_staff=True, goes_to="/console/",
             does="approves or denies the requests runs wait on"),
    DemoRole("admin", "superuser", is_staff=True, is_superuser=True, goes_to="/admin/", does="may do everything"),
)


@dataclass(frozen=True)
class DemoLogin:
    """A demo account as created: the user, its password, and its role."""

    user: AbstractUser
    password: str
    role: DemoRole


def _demo_passwords_load_or_create(password_file: Path, usernames: list[str]) -> dict[str, str]:
    """The passwords stored in ``password_file`` (one "username password" a line), minted for names missing."""
    try:
        lines = password_file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = []
    passwords = dict(line.split(None, 1) for line in lines if len(line.split(None, 1)) == 2)
    passwords = {name: password.strip() for name, password in passwords.items()}
    if all(passwords.get(name) for name in usernames):
        return passwords
    for name in usernames:
        passwords[name] = passwords.get(name) or secrets.token_urlsafe(12)
    # 0o600: the file holds working logins; other local users must not read it.
    fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as stream:
        stream.writelines(f"{name} {password}\n" for name, password in passwords.items())
    return passwords


@transaction.atomic
def demo_users_ensure(*, password_file: Path) -> list[DemoLogin]:
    """Make one demo user per role (DEMO_ROLES) exist with its groups, flags and stored password.

    Passwords live in a file rather than the database so they survive a database reset and stay the same
    across restarts of `manage.py serve`; a password changed in the database is set back.
    """
    passwords = _demo_passwords_load_or_create(password_file, [role.username for role in DEMO_ROLES])
    logins = []
    for role in DEMO_ROLES:
        user, _ = get_user_model().objects.get_or_create(username=role.username)
        user.is_staff, user.is_superuser, user.is_active = role.is_staff, role.is_superuser, True
        password = passwords[role.username]
        if not user.check_password(password):
            user.set_password(password)
        user.full_clean()
        user.save()
        user.groups.set([role_group_ensure(name) for name in role.groups])
        logins.append(DemoLogin(user=user, password=password, role=role))
    return logins
