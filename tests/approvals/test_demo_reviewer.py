"""The demo reviewer that `manage.py serve` prints a login for in DEBUG."""

from __future__ import annotations

import stat

import pytest
from django.contrib.auth import authenticate

from approvals.access import REVIEWERS_GROUP
from approvals.services import demo_reviewer_ensure

pytestmark = pytest.mark.django_db


def test_demo_reviewer_can_log_in_with_the_returned_password(tmp_path):
    user, password = demo_reviewer_ensure(password_file=tmp_path / ".demo-reviewer")
    assert authenticate(username="reviewer", password=password) == user


def test_demo_reviewer_is_staff_in_the_reviewers_group(tmp_path):
    user, _ = demo_reviewer_ensure(password_file=tmp_path / ".demo-reviewer")
    assert user.is_staff
    assert list(user.groups.values_list("name", flat=True)) == [REVIEWERS_GROUP]


def test_demo_reviewer_password_is_stable_across_restarts(tmp_path):
    password_file = tmp_path / ".demo-reviewer"
    _, first = demo_reviewer_ensure(password_file=password_file)
    _, second = demo_reviewer_ensure(password_file=password_file)
    assert second == first
    assert password_file.read_text().strip() == first


def test_demo_reviewer_password_file_is_private(tmp_path):
    password_file = tmp_path / ".demo-reviewer"
    demo_reviewer_ensure(password_file=password_file)
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600


def test_demo_reviewer_password_is_restored_after_a_change_in_the_database(tmp_path):
    password_file = tmp_path / ".demo-reviewer"
    user, password = demo_reviewer_ensure(password_file=password_file)
    user.set_password("something-else")
    user.save()
    demo_reviewer_ensure(password_file=password_file)
    assert authenticate(username="reviewer", password=password) == user
