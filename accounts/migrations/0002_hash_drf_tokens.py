"""Django REST framework's clear-text tokens (rest_framework.authtoken, one per user) become hashed API tokens.

Each key in ``authtoken_token`` is stored as its SHA-256 in an ApiToken named "Token from before named tokens",
with its creation time, so clients that hold it keep working; then that table is dropped, so no clear-text key
is left in the database. The authtoken app is no longer installed (its ``drf_create_token`` command and its
admin form made clear-text keys), so its table is read by name, where it exists: a database made after this
change never had it. Going back cannot bring clear-text keys back: the tokens stay hashed, and are dropped with
the model if accounts is migrated to zero.

The hashing is written out here rather than imported from accounts.keys, so that this migration keeps doing
what it did when that module changes.
"""

import datetime
import hashlib

from django.db import migrations
from django.utils.dateparse import parse_datetime

DRF_TABLE = "authtoken_token"
MIGRATED_NAME = "Token from before named tokens"
MIGRATED_PREFIX_CHARS = 8  # of a 40-hex-digit key: 32 of its 160 bits


def _aware(created):
    """A stored creation time as an aware datetime: SQLite gives it back naive (or as text), in UTC."""
    if isinstance(created, str):
        created = parse_datetime(created)
    if created.tzinfo is None:
        created = created.replace(tzinfo=datetime.UTC)
    return created


def hash_drf_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if DRF_TABLE not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("accounts", "ApiToken")
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {qn('key')}, {qn('user_id')}, {qn('created')} FROM {qn(DRF_TABLE)}")
        rows = cursor.fetchall()
    ApiToken.objects.using(connection.alias).bulk_create([
        ApiToken(user_id=user_id, name=MIGRATED_NAME, prefix=key[:MIGRATED_PREFIX_CHARS],
                 digest=hashlib.sha256(key.encode()).hexdigest(), created_at=_aware(created))
        for key, user_id, created in rows
    ])
    schema_editor.execute(f"DROP TABLE {qn(DRF_TABLE)}")


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(hash_drf_tokens, reverse_code=migrations.RunPython.noop, elidable=False),
    ]
