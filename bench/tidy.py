"""The database between the bench's parts, as autovacuum keeps a production one: PostgreSQL's dead rows vacuumed
and its statistics fresh.

Every part deletes the runs it made, and a deleted row stays behind as a dead tuple until a vacuum. Where
autovacuum is off (this project's CI machines run PostgreSQL with ``autovacuum = off``) they pile up from one
bench run to the next: 450,000 dead journal rows (97 MB) after a few runs, and the same resume measured 11.4 ms
on a database autovacuum kept, 16.8 ms on that one. Vacuuming Deuz's tables before each part makes a part's
figure depend on the code, not on what the database went through before.
"""

from __future__ import annotations

from django.apps import apps
from django.db import connection

__all__ = ["database_tidy"]

_APPS = ("runs", "approvals")


def database_tidy() -> None:
    """VACUUM (ANALYZE) Deuz's tables on PostgreSQL (outside any transaction); nothing on other databases."""
    if connection.vendor != "postgresql":
        return
    quote = connection.ops.quote_name
    tables = sorted({model._meta.db_table for label in _APPS for model in apps.get_app_config(label).get_models()})
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM (ANALYZE) {', '.join(quote(table) for table in tables)}")
