"""The demo users `manage.py serve` makes in DEBUG, one per role, with the passwords it prints."""

from __future__ import annotations

import stat

import pytest
from django.contrib.auth import authenticate

from approvals.roles import approval_is_decidable_by
from demo.users import DEMO_ROLES, demo_users_ensure
from runs.access import VIEW_EVERY_RUN

pytestmark = pytest.mark.django_db


def by_name(logins) -> dict:
    return {login.user.get_username(): login for login in logins}


def test_there_is_one_demo_user_per_role(tmp_path):
    logins = demo_users_ensure(password_file=tmp_path / ".demo-logins")
    assert [login.role.role for login in logins] == ["plain API user", "support", "reviewer", "superuser"]


def test_each_demo_user_signs_in_with_its_password(tmp_path):
    logins = demo_users_ensure(password_file=tmp_path / ".demo-logins")
    assert [authenticate(username=login.user.get_username(), password=login.password) for login in logins] == [
        login.user for login in logins
    ]


def test_each_demo_user_holds_exactly_its_roles_rights(tmp_path):
    users = {name: login.user for name, login in by_name(demo_users_ensure(password_file=tmp_path / "f")).items()}
    rights = {
        name: (user.is_staff, user.is_superuser, user.has_perm(VIEW_EVERY_RUN), approval_is_decidable_by(user=user))
        for name, user in users.items()
    }
    assert rights == {
        "api-user": (False, False, False, False),
        "support": (True, False, True, False),
        "reviewer": (True, False, True, True),
        "admin": (True, True, True, True),
    }


def test_support_and_reviewers_may_view_the_admins_run_and_approval_records(tmp_path):
    users = by_name(demo_users_ensure(password_file=tmp_path / "f"))
    for name in ("support", "reviewer"):
        user = users[name].user
        assert user.has_perms(["runs.view_run", "approvals.view_approvalrequest"]), name


def test_the_passwords_are_stable_across_restarts(tmp_path):
    password_file = tmp_path / ".demo-logins"
    first = {name: login.password for name, login in by_name(demo_users_ensure(password_file=password_file)).items()}
    second = {name: login.password for name, login in by_name(demo_users_ensure(password_file=password_file)).items()}
    assert second == first
    assert len(set(first.values())) == len(DEMO_ROLES)  # each its own


def test_the_password_file_is_private(tmp_path):
    password_file = tmp_path / ".demo-logins"
    demo_users_ensure(password_file=password_file)
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600


def test_a_password_changed_in_the_database_is_set_back(tmp_path):
    password_file = tmp_path / ".demo-logins"
    login = by_name(demo_users_ensure(password_file=password_file))["reviewer"]
    login.user.set_password("something-else")
    login.user.save()
    demo_users_ensure(password_file=password_file)
    assert authenticate(username="reviewer", password=login.password) == login.user


def test_a_demo_user_put_in_another_group_gets_its_own_groups_back(tmp_path):
    password_file = tmp_path / ".demo-logins"
    users = by_name(demo_users_ensure(password_file=password_file))
    users["api-user"].user.groups.add(users["reviewer"].user.groups.get())
    demo_users_ensure(password_file=password_file)
    assert not approval_is_decidable_by(user=type(users["api-user"].user).objects.get(username="api-user"))


def test_serve_prints_each_demo_login_and_where_it_goes(tmp_path):
    from io import StringIO
    from types import SimpleNamespace

    from runs.management.commands.serve import Command

    logins = demo_users_ensure(password_file=tmp_path / ".demo-logins")
    command = Command(stdout=StringIO())
    command.embedded_workers = 1
    command._announce(SimpleNamespace(listening_addresses=[("127.0.0.1", 8123)]), "127.0.0.1", logins)
    printed = command.stdout.getvalue()
    assert "sign in at http://127.0.0.1:8123/accounts/login/" in printed
    for login, goes_to in zip(logins, ["runs/", "runs/", "console/", "admin/"], strict=True):
        line = next(line for line in printed.splitlines() if f"{login.user.get_username()} / {login.password}" in line)
        assert line.endswith(f"goes to http://127.0.0.1:8123/{goes_to}"), line
    assert "manage.py token create api-user --name NAME" in printed
