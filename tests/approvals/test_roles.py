"""The migration creates the support and reviewers groups with the permissions approvals.roles names."""

import pytest
from django.contrib.auth.models import Group
from approvals.roles import ROLE_PERMISSIONS

@pytest.mark.django_db
def test_each_role_group_holds_exactly_its_permissions():
    for name, perms in ROLE_PERMISSIONS.items():
        g = Group.objects.get(name=name)
        got = {f"{p.content_type.app_label}.{p.codename}" for p in g.permissions.select_related("content_type")}
        assert got == set(perms), (name, got)
