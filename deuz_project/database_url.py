"""The URL of this process's default database, for the child processes it starts (workers, daphne, a bench's
fresh process) to share: the one home of that translation from Django's settings back to a DATABASE_URL."""

from __future__ import annotations

from urllib.parse import quote

from django.db import connection

__all__ = ["database_url"]


def database_url() -> str:
    """This process's default database as a DATABASE_URL (the test database under pytest). Raises ValueError
    for a database no other process can open (in-memory SQLite) or a back end other than SQLite and
    PostgreSQL."""
    config = connection.settings_dict
    if connection.vendor == "sqlite":
        name = str(config["NAME"] or "")
        if not name or name.startswith(":memory:") or "mode=memory" in name:
            raise ValueError("An in-memory SQLite database cannot be shared with another process.")
        return f"sqlite:///{name}"
    if connection.vendor == "postgresql":
        user = quote(config.get("USER") or "", safe="")
        password = f":{quote(config['PASSWORD'], safe='')}" if config.get("PASSWORD") else ""
        auth = f"{user}{password}@" if user or password else ""
        port = f":{config['PORT']}" if config.get("PORT") else ""
        return f"postgres://{auth}{config.get('HOST') or '127.0.0.1'}{port}/{config['NAME']}"
    raise ValueError(f"Only SQLite and PostgreSQL databases are shared with other processes, not {connection.vendor}.")
