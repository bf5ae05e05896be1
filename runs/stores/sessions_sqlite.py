"""The SQLite engine's session store: a fenced view's steady saves and its loads on the event loop's own connection.

On SQLite an async save through the ORM would hop to the ORM's thread and back, which costs more than the save
(runs.stores.direct says why). So a fenced view that knows its key's head runs the save's few statements (the
fence's UPDATE, the new messages, the checkpoint, the journal parts its hook writes) in one transaction on the
loop's own sqlite3 connection (runs.stores.direct_sqlite), and reads a resume's checkpoint there too. Anything
else (a first save, a hook that needs the ORM, a busy database) takes the shared store's ORM path
(runs.stores.sessions), which this class extends; DatabaseSessionStore builds it on SQLite.
"""

from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DEFAULT_DB_ALIAS, connections

from runs.runtime.stores import root_run_id
from runs.runtime.types import AgentCheckpoint
from runs.secrets.sealing import seal
from runs.stores import direct_sqlite
from runs.stores.direct import DirectUnavailable, enabled
from runs.stores.sessions import (
    DatabaseSessionStore, DirectHookWork, _checkpoint_params, _checkpoint_sql, _checkpoint_values, _completed,
    _encode, _Head, _known_prefix, _message_sql,
)

__all__ = ["SQLiteSessionStore"]

_RETURNS_ID = "RETURNING"


class SQLiteSessionStore(DatabaseSessionStore):
    """DatabaseSessionStore on SQLite (it builds this class there: name DatabaseSessionStore in settings)."""

    def save(self, checkpoint: AgentCheckpoint) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self.save_sync(checkpoint)
        if self._save_direct(checkpoint):
            return _completed(None)
        return self._save_async(checkpoint)  # one thread hop, through a wrapper built once per view

    async def aload(self, run_id: str) -> AgentCheckpoint | None:
        """The latest checkpoint, read again. A fenced view reads on the event loop's own connection
        (runs.stores.direct_sqlite), where its steady saves write: no thread hop on a resume's path. Any other view
        (or when it cannot read there now) reads through the ORM's thread, which sees what that thread has not
        committed yet."""
        if self.fence is not None and enabled():
            try:
                with connections[DEFAULT_DB_ALIAS].wrap_database_errors:
                    return direct_sqlite.read(lambda cursor: self._load(run_id, cursor))
            except DirectUnavailable:
                pass
        return await sync_to_async(self.load_sync)(run_id)

    def _save_direct(self, checkpoint: AgentCheckpoint) -> bool:
        """The save on the event loop's own thread (runs.stores.direct_sqlite), when it can go there: a fenced view that
        knows the key's head, a hook that can say what it writes without the ORM, SQLite not busy. False when
        it cannot (nothing written: the caller takes the ORM's path); raises what the write raised."""
        fence, key = self.fence, checkpoint["run_id"]
        known = self._heads.get(key)
        if fence is None or known is None or not fence.knows_run_pk or root_run_id(key) != fence.run_id:
            return False
        messages = checkpoint["messages"]
        shared = _known_prefix(known, messages)
        if shared is None:
            return False
        work: DirectHookWork | None = None
        if self.on_save is not None:
            prepare = getattr(self.on_save, "direct", None)
            work = prepare(checkpoint, known.status, fence.run_pk) if prepare is not None else None
            if work is None:
                return False
        committed = False
        del self._heads[key]  # as in save_sync: a failed save leaves this view knowing nothing
        try:
            with connections[DEFAULT_DB_ALIAS].wrap_database_errors:  # sqlite3's errors as Django's
                head_id, head_plain = direct_sqlite.fenced_write(
                    lambda cursor: self._write_direct(cursor, checkpoint, shared, work)
                )
            committed = True
        except DirectUnavailable:
            self._heads[key] = known
            return False
        finally:
            if work is not None:
                work.done(committed)
        self._heads[key] = _Head(head_id, len(messages), head_plain, messages, checkpoint["status"])
        return True

    def _write_direct(
        self, cursor: Any, checkpoint: AgentCheckpoint, shared: tuple[int | None, int, bytes | None],
        work: DirectHookWork | None,
    ) -> tuple[int | None, bytes | None]:
        """The statements of a save on a sqlite3 cursor in an open transaction: the fence first, as always."""
        assert self.fence is not None
        db = connections[DEFAULT_DB_ALIAS]
        key, messages = checkpoint["run_id"], checkpoint["messages"]
        changes = self.run_changes(checkpoint) if self.run_changes is not None else {}
        run_pk = self.fence.hold_direct(cursor, **changes)
        head_id, count, head_plain = shared
        message_sql = direct_sqlite.sql(_message_sql(db))
        for position in range(count, len(messages)):
            head_plain = _encode(messages[position])
            cursor.execute(message_sql, [run_pk, key, head_id, position, seal(head_plain)])
            head_id = cursor.fetchone()[0] if _RETURNS_ID in message_sql else cursor.lastrowid
        values = _checkpoint_values(checkpoint, run_pk, head_id, self.fence.epoch)
        cursor.execute(direct_sqlite.sql(_checkpoint_sql(db)), _checkpoint_params(db, values))
        if _RETURNS_ID in message_sql:
            cursor.fetchone()
        if work is not None:
            work.write(cursor)
        return head_id, head_plain

