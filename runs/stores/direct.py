"""Fenced writes without a thread hop: what the two engines' direct connections share.

The ORM may not run on an event loop's thread, so every async save used to hop to a worker thread and back,
which cost more than the save itself (the hop, and the caches of another core). So a leg's steady saves skip
the ORM and go on a connection of the event loop's own, each engine its way:

- SQLite (runs.stores.direct_sqlite): a save is a few statements that take a fraction of a millisecond on the
  file the process already has open, so the loop's thread runs them on a plain sqlite3 connection it owns.
- PostgreSQL (runs.stores.direct_postgres): a save is one statement (runs.stores.sessions_postgres folds the
  fence, the inserts and the journal parts into data-modifying CTEs), sent on the loop's own async psycopg
  connection in autocommit and awaited on the loop.

Both keep the ORM's guarantees (the fence in the write's own transaction, everything or nothing), and both
give way rather than wait: a connection that is busy or cannot be opened answers DirectUnavailable, nothing
is written, and the caller takes the ORM's path through a thread, which waits as long as it must.
"""

from __future__ import annotations

from django.conf import settings

__all__ = ["DirectUnavailable", "enabled"]


class DirectUnavailable(Exception):
    """The write cannot go direct now (not SQLite, or the database is busy): take the ORM's path."""


def enabled() -> bool:
    """Whether direct saves are on (settings.DEUZ_DIRECT_SAVES)."""
    return bool(getattr(settings, "DEUZ_DIRECT_SAVES", True))
