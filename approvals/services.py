"""Writes for approvals: who may decide, and (later) the decisions themselves."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser, Group
from django.db import transaction

__all__ = ["DEMO_REVIEWER_USERNAME", "REVIEWERS_GROUP", "demo_reviewer_ensure"]

REVIEWERS_GROUP = "reviewers"
DEMO_REVIEWER_USERNAME = "reviewer"


def _demo_password_load_or_create(password_file: Path) -> str:
    """The password stored in ``password_file``, minted on first use (owner-only file)."""
    try:
        password = password_file.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        password = ""
    if password:
        return password
    password = secrets.token_urlsafe(12)
    # 0o600: the file holds a working login; other local users must not read it.
    fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as stream:
        stream.write(password + "\n")
    return password


@transaction.atomic
def demo_reviewer_ensure(*, password_file: Path) -> tuple[AbstractUser, str]:
    """Make the demo reviewer exist, staff, in the reviewers group, with the stored password.

    The password lives in a file rather than the database so it survives a
    database reset and stays the same across restarts of `manage.py serve`.
    """
    password = _demo_password_load_or_create(password_file)
    user, _ = get_user_model().objects.get_or_create(username=DEMO_REVIEWER_USERNAME)
    user.is_staff = True
    user.is_active = True
    if not user.check_password(password):
        user.set_password(password)
    user.full_clean()
    user.save()
    group, _ = Group.objects.get_or_create(name=REVIEWERS_GROUP)
    user.groups.add(group)
    return user, password
