"""A database from before named tokens: Django REST framework's clear-text keys (rest_framework.authtoken) are
hashed into API tokens by accounts' 0002 migration, keep authenticating, and leave no clear-text key behind."""

from __future__ import annotations

import importlib
import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from rest_framework.test import APIClient

from accounts.models import ApiToken

BEFORE = [("accounts", "0001_initial")]
#: Django REST framework's own migrations of its token table, as a database made before this change applied them.
DRF_MIGRATIONS = ["0001_initial", "0002_auto_20160226_1747"]
OLD_KEY = "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"  # the shape of every DRF key: 40 hex digits


def drf_token_table(executor: MigrationExecutor, user_id: int, key: str) -> None:
    """authtoken_token as rest_framework.authtoken's migrations make it, holding ``key`` of ``user_id``."""
    state = executor.loader.project_state(BEFORE[0])
    with connection.schema_editor() as editor:
        for name in DRF_MIGRATIONS:
            migration = importlib.import_module(f"rest_framework.authtoken.migrations.{name}").Migration
            for operation in migration.operations:
                before = state.clone()
                operation.state_forwards("authtoken", state)
                operation.database_forwards("authtoken", editor, before, state)
    state.apps.get_model("authtoken", "Token").objects.create(key=key, user_id=user_id)


@pytest.fixture
def old_database(transactional_db, django_user_model):
    """The database before accounts' 0002, with a user's DRF token; migrated to the newest state afterwards."""
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    user = django_user_model.objects.create_user("ada")
    drf_token_table(executor, user.pk, OLD_KEY)
    yield user
    migrate_to_newest()
    if "authtoken_token" in connection.introspection.table_names():  # a failed test left it
        with connection.schema_editor() as editor:
            editor.execute("DROP TABLE authtoken_token")


def migrate_to_newest() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_an_existing_drf_key_still_authenticates_after_the_migration(old_database):
    migrate_to_newest()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {OLD_KEY}")
    response = client.get("/api/tokens/")
    assert response.status_code == 200
    assert [row["name"] for row in response.json()["results"]] == ["Token from before named tokens"]


def test_the_migrated_token_is_the_users_hashed_with_its_creation_time(old_database):
    migrate_to_newest()
    token = ApiToken.objects.get()
    assert (token.user, token.prefix, token.expires_at) == (old_database, OLD_KEY[:8], None)
    assert token.created_at is not None and token.created_at.tzinfo is not None


def test_no_clear_text_key_is_left_in_the_database(old_database):
    migrate_to_newest()
    assert "authtoken_token" not in connection.introspection.table_names()
    rows = json.dumps(list(ApiToken.objects.values()), default=str)
    assert OLD_KEY not in rows
