"""What an earlier bench run left in the database, said before the figures it would skew.

Every part deletes the runs it made, and on PostgreSQL a deleted row stays behind as a dead tuple until a
vacuum. Where autovacuum is off (this project's CI machines run PostgreSQL with ``autovacuum = off``) they
pile up from one bench run to the next: after a dozen runs 450,000 dead journal rows (97 MB), and the resume
measured 16.8 ms where a fresh database gave 12.2. Vacuuming before a part is no cure: tables vacuumed while
empty made the throughput run twice as slow (32 s on a fresh database, 55-84 s after; no statement over 20 ms,
so presumably the plans the workers' connections prepare, chosen for empty tables: not shown). So the bench
says what it found and leaves the database alone.
"""

from __future__ import annotations

from django.apps import apps
from django.db import connection

__all__ = ["DEAD_ROWS_WARN", "dead_rows", "dead_rows_warning"]

#: Dead rows in Deuz's tables past which the figures are worth doubting (a full bench run leaves ~40,000).
DEAD_ROWS_WARN = 100_000

_APPS = ("runs", "approvals")


def dead_rows() -> int | None:
    """Dead tuples in Deuz's tables by PostgreSQL's statistics; None on other databases."""
    if connection.vendor != "postgresql":
        return None
    tables = sorted({model._meta.db_table for label in _APPS for model in apps.get_app_config(label).get_models()})
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE relname = ANY(%s)",
                       [tables])
        (count,) = cursor.fetchone()
    return int(count)


def dead_rows_warning(count: int | None, *, database: str) -> str | None:
    """The warning for ``count`` dead rows, or None when there are too few to matter."""
    if count is None or count < DEAD_ROWS_WARN:
        return None
    return (f"warning: {database} holds {count:,} dead rows from earlier runs (is autovacuum off?); they slow "
            "these figures down. Measure on a new database (createdb) or after VACUUM ANALYZE with the tables "
            "in use.")
