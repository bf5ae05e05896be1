"""The PostgreSQL engine's session store: a fenced view's save is one statement, on the loop's own connection.

Each statement is a round trip on PostgreSQL, so a fenced view folds a save into one: the fence's UPDATE, the
new messages, the checkpoint and the journal parts its hook writes, as data-modifying CTEs that write only if
the fence's UPDATE matched the run (a stale epoch writes nothing). A steady save (the key's head known, a hook
that can say its journal rows without the ORM, a few new messages) runs that statement alone in autocommit,
its own transaction: from an event loop on the view's own async connection (runs.stores.direct_postgres, no
thread hop), from a thread on the ORM's. Anything else runs in a transaction of the ORM's, still folded where
it can be. This class extends the shared store (runs.stores.sessions); DatabaseSessionStore builds it on
PostgreSQL.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.utils import timezone

from runs.errors import StaleOwnerError
from runs.models import Checkpoint, JournalEntry, Run, RunMessage
from runs.ownership.fencing import OwnerFence, adapt_run_field
from runs.runtime.stores import SaveHook, root_run_id
from runs.runtime.types import AgentCheckpoint
from runs.secrets.sealing import seal
from runs.stores import direct_postgres
from runs.stores.direct import DirectUnavailable, enabled
from runs.stores.sessions import (
    _CHECKPOINT_COLUMNS, DatabaseSessionStore, DirectHookWork, RunChanges, _checkpoint_params, _checkpoint_values,
    _encode, _Head, _known_prefix, _saved_row,
)

__all__ = ["PostgresSessionStore"]


class PostgresSessionStore(DatabaseSessionStore):
    """DatabaseSessionStore on PostgreSQL (it builds this class there: name DatabaseSessionStore in settings)."""

    def __init__(
        self, *, fence: OwnerFence | None = None, on_save: SaveHook | None = None, run_changes: RunChanges | None = None
    ) -> None:
        super().__init__(fence=fence, on_save=on_save, run_changes=run_changes)
        # A fenced view sends its steady saves on a connection of its own (runs.stores.direct_postgres).
        self._postgres = direct_postgres.AsyncPostgres() if fence is not None and enabled() else None

    def save(self, checkpoint: AgentCheckpoint) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self.save_sync(checkpoint)
        if self._postgres is not None:
            return self._asave_postgresql(checkpoint)
        return self._save_async(checkpoint)  # one thread hop, through a wrapper built once per view

    def save_sync(self, checkpoint: AgentCheckpoint) -> Checkpoint:
        key = checkpoint["run_id"]
        # Taken out for the save: a save that fails (or rolls back) leaves this view knowing nothing, so the
        # next one reads the stored head again.
        known = self._heads.pop(key, None)
        if known is not None and self.fence is not None:
            row = self._save_folded_alone(checkpoint, known)
            if row is not None:
                return row
        return self._save_in_transaction(checkpoint, key, known)

    async def aclose(self) -> None:
        """Close this view's own connection, if it opened one (a leg closes its store when it ends)."""
        if self._postgres is not None:
            await self._postgres.aclose()

    def _save_folded_alone(self, checkpoint: AgentCheckpoint, known: _Head) -> Checkpoint | None:
        """A steady save whose hook only writes journal parts is one statement in autocommit: the
        fence's UPDATE, the new messages, the checkpoint and the parts, as data-modifying CTEs of one statement,
        which is its own transaction (no BEGIN or COMMIT round trip). None when it does not apply."""
        db = connections[DEFAULT_DB_ALIAS]
        if db.in_atomic_block or not db.get_autocommit():
            return None
        plan = self._plan_alone(db, checkpoint, known)
        if plan is None:
            return None
        shared, work = plan
        committed = False
        try:
            folded = self._folded(db, checkpoint, shared, work.rows() if work is not None else [])
            with db.cursor() as cursor:
                cursor.execute(folded.sql, folded.params)
                written = cursor.fetchone()
            row = self._folded_row(folded, written)
            committed = True
        finally:
            if work is not None:
                work.done(committed)
        messages = checkpoint["messages"]
        key, status = checkpoint["run_id"], checkpoint["status"]
        self._heads[key] = _Head(row.head_id, len(messages), folded.head_plain, messages, status)
        return row

    def _save_rows(
        self, db: Any, checkpoint: AgentCheckpoint, known: _Head | None, *, journal_rows: list[tuple] = ()
    ) -> tuple[Checkpoint, bytes | None]:
        """A fenced view's whole save in one statement (one round trip): the fence's UPDATE, then, only if it
        matched a row, the new messages, the checkpoint and ``journal_rows``, as data-modifying CTEs. A stale
        epoch matches no row: nothing is written and StaleOwnerError is raised. An unfenced view's save (a
        script's) goes statement by statement, as on every engine."""
        if self.fence is None:
            return self._save_statements(db, checkpoint, known)
        key, messages = checkpoint["run_id"], checkpoint["messages"]
        shared = self._shared_prefix(key, known, messages)
        if len(messages) - shared[1] > _FOLDED_MESSAGES:  # a long first history: statement by statement
            return self._save_statements(db, checkpoint, known)
        folded = self._folded(db, checkpoint, shared, journal_rows)
        with db.cursor() as cursor:
            cursor.execute(folded.sql, folded.params)
            written = cursor.fetchone()
        return self._folded_row(folded, written), folded.head_plain

    def _folded(
        self, db: Any, checkpoint: AgentCheckpoint, shared: tuple[int | None, int, bytes | None],
        journal_rows: list[tuple],
    ) -> _Folded:
        """The folded statement of a save whose history shares ``shared`` with the stored head, and its params."""
        fence = self.fence
        assert fence is not None
        key, messages = checkpoint["run_id"], checkpoint["messages"]
        if fence.run_id != root_run_id(key):
            raise ValueError(f"This store is fenced to run {fence.run_id!r}, not {root_run_id(key)!r}.")
        head_id, count, head_plain = shared
        plains = [_encode(message) for message in messages[count:]]
        changes = self.run_changes(checkpoint) if self.run_changes is not None else {}
        params: list[Any] = [db.ops.adapt_datetimefield_value(timezone.now())]
        params += [adapt_run_field(db, name, value) for name, value in changes.items()]
        params += [fence.run_pk, fence.epoch]
        for offset, plain in enumerate(plains):
            params += [key, head_id] if offset == 0 else [key]
            params += [count + offset, seal(plain)]
        values = _checkpoint_values(checkpoint, fence.run_pk, None, fence.epoch)
        checkpoint_params = _checkpoint_params(db, values)
        del checkpoint_params[0]  # the run's id comes from the fence's UPDATE
        if plains:
            del checkpoint_params[5]  # and the head's from the last message's INSERT
        else:
            checkpoint_params[5] = head_id
        params += checkpoint_params
        if journal_rows:  # (run, seq, is_sentinel, part, epoch, created_at): the run's id comes from the fence,
            params += [journal_rows[0][4]]  # created_at from the statement's start (now())
            for journal_row in journal_rows:
                params += [journal_row[1], journal_row[3]]
        sql = _folded_sql_for(db.vendor, len(plains), tuple(changes), len(journal_rows))
        return _Folded(sql, params, values, plains[-1] if plains else head_plain, head_id, bool(plains))

    def _folded_written(self, folded: _Folded, written: tuple[Any, ...] | None) -> tuple[int | None, int]:
        """The saved row's head and id, from what the folded statement answered (nothing: the fence matched no
        row)."""
        fence = self.fence
        assert fence is not None
        if written is None:
            raise StaleOwnerError(fence.run_id, fence.epoch)
        return (written[0] if folded.adds_messages else folded.head_id), written[1]

    def _folded_row(self, folded: _Folded, written: tuple[Any, ...] | None) -> Checkpoint:
        head_id, pk = self._folded_written(folded, written)
        return _saved_row({**folded.values, "head_id": head_id}, pk)

    def _plan_alone(self, db: Any, checkpoint: AgentCheckpoint, known: _Head) -> tuple[Any, ...] | None:
        """What a folded save on its own (no transaction of the ORM's) needs: the shared prefix and the hook's
        work; None when this save cannot go that way (the hook needs the ORM, a long new history, ...)."""
        if self.fence is None or not self.fence.knows_run_pk:
            return None
        shared = _known_prefix(known, checkpoint["messages"])
        if shared is None or len(checkpoint["messages"]) - shared[1] > _FOLDED_MESSAGES:
            return None
        work: DirectHookWork | None = None
        if self.on_save is not None:
            prepare = getattr(self.on_save, "direct", None)
            work = prepare(checkpoint, known.status, self.fence.run_pk) if prepare is not None else None
            if work is None:
                return None
        return shared, work

    async def _asave_postgresql(self, checkpoint: AgentCheckpoint) -> None:
        """An async save: a steady one is its folded statement on this view's own async connection
        (runs.stores.direct_postgres.AsyncPostgres), awaited without a thread hop; any other takes the ORM's path."""
        key, messages = checkpoint["run_id"], checkpoint["messages"]
        known = self._heads.get(key)
        db = connections[DEFAULT_DB_ALIAS]
        plan = self._plan_alone(db, checkpoint, known) if known is not None else None
        if plan is None:
            await self._save_async(checkpoint)
            return
        shared, work = plan
        committed = False
        del self._heads[key]  # a failed save leaves this view knowing nothing
        try:
            folded = self._folded(db, checkpoint, shared, work.rows() if work is not None else [])
            try:
                with db.wrap_database_errors:  # psycopg's errors as Django's
                    written = await self._postgres.fetch_one(folded.sql, folded.params)
            except DirectUnavailable:
                self._heads[key] = known
                if work is not None:
                    work.done(False)
                    work = None
                await self._save_async(checkpoint)
                return
            head_id, _ = self._folded_written(folded, written)
            committed = True
        finally:
            if work is not None:
                work.done(committed)
        self._heads[key] = _Head(head_id, len(messages), folded.head_plain, messages, checkpoint["status"])


@dataclass(slots=True)
class _Folded:
    """A save's folded statement (PostgreSQL), its params, and what the saved row will be."""

    sql: str
    params: list[Any]
    values: dict[str, Any]  # the checkpoint row's, its head's id unknown yet
    head_plain: bytes | None
    head_id: int | None
    adds_messages: bool


#: New messages a PostgreSQL save folds into its one statement (a step adds one; more is a first, long history).
_FOLDED_MESSAGES = 8


@functools.cache
def _folded_sql_for(vendor: str, new: int, changes: tuple[str, ...], journal: int = 0) -> str:
    """The folded statement of a save writing ``new`` messages, ``changes`` (run fields) and ``journal`` parts,
    built once per shape."""
    quote = connection.ops.quote_name

    def cast(model: Any, name: str) -> str:
        return f"%s::{model._meta.get_field(name).db_type(connection)}"

    sets = ", ".join(["updated_at = %s::timestamptz", *(f"{quote(Run._meta.get_field(name).column)} = {cast(Run, name)}"
                                                          for name in changes)])
    parts = [f"f AS (UPDATE {quote(Run._meta.db_table)} SET {sets} WHERE id = %s AND owner_epoch = %s RETURNING id)"]
    message_columns = ", ".join(quote(column) for column in ("run_id", "session_key", "parent_id", "position", "data"))
    for index in range(1, new + 1):
        parent, sources = ("%s::bigint", "f") if index == 1 else (f"m{index - 1}.id", f"f, m{index - 1}")
        parts.append(
            f"m{index} AS (INSERT INTO {quote(RunMessage._meta.db_table)} ({message_columns}) "
            f"SELECT f.id, {cast(RunMessage, 'session_key')}, {parent}, {cast(RunMessage, 'position')}, "
            f"{cast(RunMessage, 'data')} FROM {sources} RETURNING id)"
        )
    values = ["f.id"]
    for name in _CHECKPOINT_COLUMNS[1:]:
        if name == "head_id":
            values.append(f"m{new}.id" if new else "%s::bigint")
        else:
            values.append(cast(Checkpoint, name))
    sources = f"f, m{new}" if new else "f"
    columns = ", ".join(quote(column) for column in _CHECKPOINT_COLUMNS)
    parts.append(
        f"c AS (INSERT INTO {quote(Checkpoint._meta.db_table)} ({columns}) SELECT {', '.join(values)} FROM {sources} "
        "RETURNING id)"
    )
    if journal:
        values = ", ".join(["(%s::integer, %s::text)"] * journal)
        parts.append(
            f"j AS (INSERT INTO {quote(JournalEntry._meta.db_table)} (run_id, seq, is_sentinel, part, owner_epoch, "
            f"created_at) SELECT f.id, v.seq, false, v.part, %s::bigint, now() FROM f, (VALUES {values}) "
            "AS v(seq, part))"
        )
    head = f"(SELECT id FROM m{new})" if new else "NULL"
    return f"WITH {', '.join(parts)} SELECT {head}, c.id FROM c"

