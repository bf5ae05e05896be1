"""DatabaseSessionStore: the runtime's OwnedSessionStore on the Django ORM, fenced by owner epoch.

A history is a chain of RunMessage rows. Saving a checkpoint writes only the messages the chain does not
have yet plus one small Checkpoint row, so a run's storage grows with its history, not with the square
of it. Loading walks the chain back from the checkpoint's head.

A save is one transaction of few statements: the fence's UPDATE of the run (which also carries the run's
step and usage mirror when the leg asks for it), one INSERT per new message (a step has one), one INSERT of
the checkpoint row. A fenced view remembers the head it committed last, so it reads nothing back: while its
epoch owns the run nobody else writes it, and the fence in the same transaction proves the epoch still does.

An async save would hop to the ORM's thread and back, which costs more than the save; a leg's steady saves
(its hook writing only journal parts) skip the hop: on SQLite they run on the event loop's own connection,
on PostgreSQL they are one statement (fence, messages, checkpoint and journal parts as data-modifying CTEs)
on the view's own async connection (runs.stores.direct). Anything else (a first save, a suspension whose
requests approvals records, a busy database) takes the ORM's path through a thread.

This module holds what every engine shares: the protocol's methods, the loads, the chain's codec and the
ORM's save path, which is the whole store on an engine with no fast path. Each engine's fast paths live in
its own module, in a subclass DatabaseSessionStore builds when it is constructed on that engine
(runs.stores.sessions_sqlite, runs.stores.sessions_postgres): a save runs its engine's code without asking
which engine it is on, and settings, tests and benchmarks name DatabaseSessionStore alone.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import orjson
from asgiref.sync import sync_to_async
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import Q
from django.utils import timezone

from runs.ownership.fencing import OwnerFence
from runs.models import Checkpoint, Run, RunMessage
from runs.runtime.codec import decode_value, encode_value
from runs.runtime.exceptions import CheckpointCorruptError
from runs.runtime.stores import SavedCheckpoint, SaveHook, root_run_id
from runs.runtime.types import AgentCheckpoint
from runs.secrets.sealing import seal, unseal
from runs.stores import direct_sqlite
from runs.stores.direct import DirectUnavailable
from runs.stores.dispatch import dispatch

_PLAIN_BYTE = ord("p")  # runs.secrets.sealing's marker of unsealed data

__all__ = [
    "DatabaseSessionStore", "DirectHookWork", "DirectSaveHook", "RunChanges", "RunMirroringSessionStore",
    "checkpoint_from_row", "root_run_id",
]

#: Fields of the run a save sets in its fence's UPDATE (a leg mirrors step and usage there), from the checkpoint.
RunChanges = Callable[[AgentCheckpoint], dict[str, Any]]

_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _encode(value: Any) -> bytes:
    return _ENCODER.encode(encode_value(value)).encode()


def _loads(data: bytes) -> Any:
    """JSON text to Python, with orjson (several times faster on long histories); json for what orjson refuses
    (NaN and infinities, which json.dumps writes)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def _decode(data: bytes) -> Any:
    value = _loads(data)
    # Only JSON holding a '"$' can hold a codec marker; everything else decodes to itself.
    return decode_value(value) if b'"$' in data else value


def _decode_chain(stored: list[Any]) -> list[Any]:
    """A chain's stored messages decoded in one JSON parse (markers, where any, decoded after)."""
    if not stored:
        return []
    if all(data[0] == _PLAIN_BYTE for data in stored):  # unsealed: the JSON follows the marker byte
        plains: list[Any] = [memoryview(data)[1:] for data in stored]
    else:
        plains = [unseal(data) for data in stored]
    blob = b"[" + b",".join(plains) + b"]"
    values = _loads(blob)
    if b'"$' in blob:
        for index, plain in enumerate(plains):
            if b'"$' in bytes(plain):
                values[index] = decode_value(values[index])
    return values


@dataclass(frozen=True, slots=True)
class _Head:
    """What a store knows of a session key's latest committed checkpoint: its head message (id and plain JSON),
    how many messages its history has, the history itself when this process holds it, and its status."""

    head_id: int | None
    count: int
    head_plain: bytes | None
    messages: list[Any] | None
    status: str | None  # None: nothing stored yet
    loaded: AgentCheckpoint | None = None  # the whole checkpoint, when this view loaded it and wrote nothing since
    found_nothing: bool = False  # this view loaded and found nothing stored, and wrote nothing since


class DatabaseSessionStore:
    """Checkpoints in the database, and nothing else. A fenced view checks the run's owner epoch in every
    save's transaction (a stale save raises StaleOwnerError) and runs its ``on_save`` hook there."""

    #: ``fenced`` takes ``run_changes``: the run's mirror rides on the fence's UPDATE (runs.execution.legs uses it).
    folds_run_changes = True

    def __new__(cls, *args: Any, **kwargs: Any) -> DatabaseSessionStore:
        # The default database's engine picks the class once, here: its fast paths are methods of its own class,
        # so a save pays no check of the engine, and ``fenced`` (type(self)) builds the same engine's kind.
        if cls is DatabaseSessionStore:
            cls = _engine_store(connections[DEFAULT_DB_ALIAS].vendor)
        return super().__new__(cls)

    def __init__(
        self, *, fence: OwnerFence | None = None, on_save: SaveHook | None = None, run_changes: RunChanges | None = None
    ) -> None:
        self.fence = fence
        self.on_save = on_save
        self.run_changes = run_changes
        self._heads: dict[str, _Head] = {}  # fenced views only: what this view committed or loaded last, per key
        self._save_async = sync_to_async(self.save_sync)

    def __repr__(self) -> str:
        return f"DatabaseSessionStore(fence={self.fence!r})"

    def fenced(
        self, run_id: str, epoch: int, *, on_save: SaveHook | None = None, run_changes: RunChanges | None = None
    ) -> DatabaseSessionStore:
        """This store for the worker that owns ``run_id`` at ``epoch``; ``on_save`` runs inside every save's
        transaction (the leg flushes its journal there, so a checkpoint never gets ahead of the wire), and
        ``run_changes`` names run fields the fence's UPDATE sets at each save."""
        return type(self)(fence=OwnerFence(run_id, epoch), on_save=on_save, run_changes=run_changes)

    # The SessionStore protocol: sync callers get results, async callers get awaitables.

    def save(self, checkpoint: AgentCheckpoint) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self.save_sync(checkpoint)
        return self._save_async(checkpoint)  # one thread hop, through a wrapper built once per view

    def load(self, run_id: str) -> Any:
        known = self._heads.get(run_id)
        if known is not None and (known.loaded is not None or known.found_nothing):
            checkpoint = self._loaded_again(known)
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return checkpoint
            return _completed(checkpoint)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self.load_sync(run_id)
        return self.aload(run_id)

    def delete(self, run_id: str) -> Any:
        return dispatch(self.delete_sync, run_id)

    def list(self) -> Any:
        return dispatch(self.list_sync)

    def checkpoint_list(self, run_id: str, *, include_sub_agents: bool = False) -> Any:
        return dispatch(self.checkpoint_list_sync, run_id, include_sub_agents)

    async def asave(self, checkpoint: AgentCheckpoint) -> None:
        await self.save(checkpoint)

    async def aload(self, run_id: str) -> AgentCheckpoint | None:
        """The latest checkpoint, read again through the ORM's thread, which sees what that thread has not
        committed yet (SQLite's fenced views read on the loop's own connection: runs.stores.sessions_sqlite)."""
        return await sync_to_async(self.load_sync)(run_id)

    # ------------------------------------------------------------------ writes

    def save_sync(self, checkpoint: AgentCheckpoint) -> Checkpoint:
        key = checkpoint["run_id"]
        # Taken out for the save: a save that fails (or rolls back) leaves this view knowing nothing, so the
        # next one reads the stored head again.
        return self._save_in_transaction(checkpoint, key, self._heads.pop(key, None))

    def _save_in_transaction(self, checkpoint: AgentCheckpoint, key: str, known: _Head | None) -> Checkpoint:
        """The save in one transaction of the ORM's, its hook inside; a failure lets the hook undo its own state."""
        messages = checkpoint["messages"]
        try:
            with transaction.atomic():
                if known is None:
                    known = _stored_head(key)
                db = connections[DEFAULT_DB_ALIAS]  # the thread's wrapper, looked up once (the proxy costs per access)
                row, head_plain = self._save_rows(db, checkpoint, known)
                row._state.adding, row._state.db = False, "default"
                if self.on_save is not None:
                    saved = SavedCheckpoint(checkpoint, row, known.status if known is not None else None)
                    if self.fence is None:
                        self.on_save(saved)
                    else:
                        with self.fence.nested():  # the hook's journal flush needs no fence check of its own
                            self.on_save(saved)
                if self.fence is not None:
                    committed = _Head(row.head_id, len(messages), head_plain, messages, checkpoint["status"])
                    transaction.on_commit(lambda: self._heads.__setitem__(key, committed))
            return row
        except BaseException:
            rolled_back = getattr(self.on_save, "rolled_back", None)
            if rolled_back is not None:  # a hook that moved state of its own (a journal writer's counters) undoes it
                rolled_back(checkpoint)
            raise

    def _save_statements(
        self, db: Any, checkpoint: AgentCheckpoint, known: _Head | None
    ) -> tuple[Checkpoint, bytes | None]:
        """The fence's UPDATE, one INSERT per new message, one for the checkpoint (SQLite: no round trips)."""
        key, messages = checkpoint["run_id"], checkpoint["messages"]
        run_pk, epoch = self._owned_run(root_run_id(key), checkpoint)
        head_id, count, head_plain = self._shared_prefix(key, known, messages)
        with db.cursor() as cursor:
            for position in range(count, len(messages)):
                head_plain = _encode(messages[position])
                head_id = _insert(db, cursor, _message_sql(db), [run_pk, key, head_id, position, seal(head_plain)])
            values = _checkpoint_values(checkpoint, run_pk, head_id, epoch)
            pk = _insert(db, cursor, _checkpoint_sql(db), _checkpoint_params(db, values))
        return _saved_row(values, pk), head_plain

    #: The save's writes in the ORM's open transaction (PostgreSQL's fenced views fold them into one statement).
    _save_rows = _save_statements

    async def aclose(self) -> None:
        """Close this view's own connection, if it opened one (a leg closes its store when it ends)."""

    def _owned_run(self, run_id: str, checkpoint: AgentCheckpoint) -> tuple[int, int]:
        """The run's primary key and the epoch writing; fenced, only while that epoch owns the run."""
        if self.fence is None:
            row = Run.objects.filter(run_id=run_id).values_list("pk", "owner_epoch").first()
            if row is None:  # a run started outside the service (a script using the store directly)
                run = Run.objects.create(run_id=run_id, agent="", input_messages="[]", status=Run.Status.RUNNING)
                row = (run.pk, run.owner_epoch)
            return row
        if self.fence.run_id != run_id:
            raise ValueError(f"This store is fenced to run {self.fence.run_id!r}, not {run_id!r}.")
        changes = self.run_changes(checkpoint) if self.run_changes is not None else {}
        return self.fence.hold(**changes), self.fence.epoch

    def _shared_prefix(
        self, key: str, known: _Head | None, messages: list[dict[str, Any]]
    ) -> tuple[int | None, int, bytes | None]:
        """The last stored message this history shares with the previous checkpoint's (id and plain JSON), and how
        many it shares. Histories are immutable (the runtime builds each step's as a new list of the same message
        objects), so the previous head's object, or else its JSON, is enough; a rewritten history branches."""
        if known is None or known.head_id is None:
            return None, 0, None
        shared = _known_prefix(known, messages)
        if shared is not None:
            return shared
        chain = _chain_rows(key, known.head_id)
        shared = 0
        for (_, _, data), message in zip(chain, messages):
            if unseal(data) != _encode(message):
                break
            shared += 1
        if not shared:
            return None, 0, None
        return chain[shared - 1][0], shared, unseal(chain[shared - 1][2])

    @transaction.atomic
    def delete_sync(self, run_id: str) -> None:
        self._heads.pop(run_id, None)
        of_key = {"run__run_id": root_run_id(run_id), "session_key": run_id}  # the tables' one index each
        Checkpoint.objects.filter(**of_key).delete()
        RunMessage.objects.filter(**of_key).delete()

    # ------------------------------------------------------------------- reads

    def load_sync(self, run_id: str) -> AgentCheckpoint | None:
        known = self._heads.get(run_id)
        if known is not None and (known.loaded is not None or known.found_nothing):
            return self._loaded_again(known)
        return self._load(run_id)

    @staticmethod
    def _loaded_again(known: _Head) -> AgentCheckpoint | None:
        """What a fenced view loaded and has written nothing since (a checkpoint, or nothing stored): while its
        epoch owns the run nobody else writes it, and its next save's fence proves it still does (a leg checks,
        then resumes)."""
        if known.loaded is None:
            return None
        return {**known.loaded, "messages": list(known.loaded["messages"])}

    def _load(self, run_id: str, cursor: Any = None) -> AgentCheckpoint | None:
        """``load_sync`` through the ORM, or with ``cursor`` on a direct connection's (which may not use the ORM:
        DirectUnavailable when the ORM is needed)."""
        row = _latest_row(run_id, cursor)
        if row is None:
            if self.fence is not None:
                if cursor is not None and not self.fence.knows_run_pk:
                    raise DirectUnavailable("the run's key is learnt through the ORM")
                # Nothing stored, and while this view's epoch owns the run nobody else will store anything: its
                # first save writes the whole history without reading a head (on PostgreSQL, direct), so the run's
                # key is learnt here, on the ORM's thread.
                self.fence.run_pk  # noqa: B018
                self._heads[run_id] = _Head(None, 0, None, [], None, found_nothing=True)
            return None
        checkpoint = self.checkpoint_from_row(row, cursor)
        if self.fence is not None:  # the next save of this view starts from here, reading nothing back
            messages = checkpoint["messages"]
            head_plain = _encode(messages[-1]) if messages else None
            self._heads[run_id] = _Head(row.head_id, row.message_count, head_plain, list(messages), row.status,
                                        loaded=checkpoint)
        return checkpoint

    def checkpoint_from_row(self, row: Checkpoint, cursor: Any = None) -> AgentCheckpoint:
        """``checkpoint_from_row``, with the history this view wrote or read last taken from its memory."""
        known = self._heads.get(row.session_key)
        if known is not None and known.messages is not None and known.head_id == row.head_id:
            return _checkpoint_of(row, list(known.messages))
        return checkpoint_from_row(row, cursor)

    def checkpoint_list_sync(self, run_id: str, include_sub_agents: bool = False) -> list[AgentCheckpoint]:
        """Every stored checkpoint of ``run_id`` (a run's or a sub-agent's key), oldest first, as AgentCheckpoint
        dicts (time travel); with ``include_sub_agents`` those of the sub-agents under it too."""
        rows = Checkpoint.objects.filter(run__run_id=root_run_id(run_id)).order_by("id")
        mine = Q(session_key=run_id)
        rows = rows.filter(mine | Q(session_key__startswith=f"{run_id}::") if include_sub_agents else mine)
        return [self.checkpoint_from_row(row) for row in rows]

    def list_sync(self) -> list[str]:
        return list(Checkpoint.objects.order_by().values_list("session_key", flat=True).distinct())


def _engine_store(vendor: str) -> type[DatabaseSessionStore]:
    """The store class of an engine: its own where it has fast paths, else the portable one (the ORM's path).
    Imported here, not at the top: the engines' modules build on this one."""
    if vendor == "sqlite":
        from runs.stores.sessions_sqlite import SQLiteSessionStore

        return SQLiteSessionStore
    if vendor == "postgresql":
        from runs.stores.sessions_postgres import PostgresSessionStore

        return PostgresSessionStore
    return DatabaseSessionStore


def checkpoint_from_row(row: Checkpoint, cursor: Any = None) -> AgentCheckpoint:
    """The AgentCheckpoint a stored Checkpoint row holds, full history included (read with ``cursor`` when given):
    how the pages and the admin read the database's records, whatever store the ``sessions`` alias names."""
    return _checkpoint_of(row, _decode_chain([data for _, _, data in _chain_rows(row.session_key, row.head_id, cursor)]))


def _checkpoint_of(row: Checkpoint, messages: list[Any]) -> AgentCheckpoint:
    checkpoint: AgentCheckpoint = {
        "version": 1,
        "run_id": row.session_key,
        "step_id": row.step_id,
        "step_index": row.step_index,
        "status": row.status,  # type: ignore[typeddict-item]
        "messages": messages,
        "usage": row.usage,
        "created_at": row.created_at_ms,
    }
    if row.pending_approvals is not None:
        checkpoint["pending_approvals"] = _decode(unseal(row.pending_approvals))
    if row.agent_path:
        checkpoint["agent_path"] = list(row.agent_path)
    return checkpoint


@runtime_checkable
class RunMirroringSessionStore(Protocol):
    """A session store whose fenced views fold the run's mirror (its step and usage, from each root checkpoint)
    into the fence's UPDATE, saving a statement per save: ``fenced`` takes ``run_changes``. The database store is
    one; a leg gives any other store its mirror through the save hook (runs.execution.legs)."""

    folds_run_changes: bool

    def fenced(
        self, run_id: str, epoch: int, *, on_save: SaveHook | None = None, run_changes: RunChanges | None = None
    ) -> Any: ...


class DirectHookWork(Protocol):
    """What a save hook writes in a direct save's transaction (runs.stores.direct), said without the ORM."""

    def write(self, cursor: Any) -> None:
        """Its statements, on the direct connection's cursor, after the save's own."""

    def rows(self) -> list[tuple[Any, ...]]:
        """Its journal rows, for a save that writes them in its own statement (PostgreSQL's)."""

    def done(self, committed: bool) -> None:
        """The transaction committed (True) or wrote nothing (False); called once, whatever happened."""


class DirectSaveHook(Protocol):
    """A save hook that can also run in a direct save: ``direct`` answers its work there, or None when this
    checkpoint needs the ORM's path (the hook then runs as a plain SaveHook, inside save_sync)."""

    def __call__(self, saved: SavedCheckpoint) -> None: ...

    def direct(
        self, checkpoint: AgentCheckpoint, previous_status: str | None, run_pk: int
    ) -> DirectHookWork | None: ...


async def _completed(value: Any) -> Any:
    return value


def _known_prefix(known: _Head, messages: list[dict[str, Any]]) -> tuple[int | None, int, bytes | None] | None:
    """The shared prefix when the previous head is this history's too (by identity, else by its JSON); None when
    telling would take reading the stored chain."""
    count = known.count
    if known.head_id is None:
        return (None, 0, None) if count == 0 else None
    if len(messages) >= count:
        if known.messages is not None and len(known.messages) == count and messages[count - 1] is known.messages[-1]:
            return known.head_id, count, known.head_plain
        if _encode(messages[count - 1]) == known.head_plain:
            return known.head_id, count, known.head_plain
    return None


# ---------------------------------------------------------------- statements


def _stored_head(key: str) -> _Head | None:
    """The latest checkpoint's head under ``key``, read from the database (one query)."""
    row = (
        Checkpoint.objects.filter(run__run_id=root_run_id(key), session_key=key).order_by("-id")
        .values_list("head_id", "message_count", "status", "head__data").first()
    )
    if row is None:
        return None
    head_id, count, status, data = row
    return _Head(head_id, count, unseal(data) if data is not None else None, None, status)


def _chain_rows(key: str, head_id: int | None, cursor: Any = None) -> list[tuple[int, int | None, Any]]:
    """(id, parent id, data) of the messages from the first to ``head_id``, following parent links (one query,
    through the ORM or on a direct SQLite connection's ``cursor``)."""
    if head_id is None:
        return []
    table = connection.ops.quote_name(RunMessage._meta.db_table)
    if cursor is not None or connection.vendor == "sqlite":
        # A range of row ids read in order beats an index lookup per row; '+' keeps SQLite off the key's index.
        sql = (f"SELECT id, parent_id, data FROM {table} WHERE id BETWEEN "
               f"(SELECT min(id) FROM {table} WHERE run_id = {_RUN_PK} AND session_key = %s) AND %s "
               "AND +session_key = %s")
        params = [root_run_id(key), key, head_id, key]
    else:
        # The (run, key) index alone, the bound checked row by row: '+ 0' keeps the planner from ANDing in a range scan
        # of the primary key, which it did on statistics left by deleted runs (50,000 ids read for 400 rows,
        # 2.7 of a resume's 12 ms; issue 8).
        sql = f"SELECT id, parent_id, data FROM {table} WHERE run_id = {_RUN_PK} AND session_key = %s AND id + 0 <= %s"
        params = [root_run_id(key), key, head_id]
    rows = {row[0]: row for row in _fetch(cursor, sql, params, many=True)}
    chain = []
    current: int | None = head_id
    while current is not None:
        row = rows.get(current)
        if row is None:  # the links carry no constraint (runs.models): a broken one is said, never a short history
            raise CheckpointCorruptError(f"The history of {key!r} is broken: its message {current} is missing.")
        chain.append(row)
        current = row[1]
    chain.reverse()
    return chain


#: The run's primary key from its run id (a session key's root), as the history tables' indexes are led by it.
_RUN_PK = f"(SELECT id FROM {Run._meta.db_table} WHERE run_id = %s)"

_LATEST_COLUMNS = (
    "id", "run_id", "session_key", "step_index", "status", "usage", "agent_path", "head_id", "message_count",
    "pending_approvals", "created_at_ms", "owner_epoch",
)


def _fetch(cursor: Any, sql: str, params: list[Any], *, many: bool) -> Any:
    """A query's rows (or first row) through the ORM's connection, or on a direct SQLite connection's ``cursor``."""
    if cursor is None:
        with connection.cursor() as orm_cursor:
            orm_cursor.execute(sql, params)
            return orm_cursor.fetchall() if many else orm_cursor.fetchone()
    cursor.execute(direct_sqlite.sql(sql), params)
    return cursor.fetchall() if many else cursor.fetchone()


def _latest_row(key: str, cursor: Any = None) -> Checkpoint | None:
    """The latest checkpoint row under ``key`` (one plain query; a resume runs it in a cold process)."""
    quote = connection.ops.quote_name
    sql = (f"SELECT {', '.join(quote(column) for column in _LATEST_COLUMNS)} FROM {quote(Checkpoint._meta.db_table)} "
           f"WHERE run_id = {_RUN_PK} AND session_key = %s ORDER BY id DESC LIMIT 1")
    found = _fetch(cursor, sql, [root_run_id(key), key], many=False)
    if found is None:
        return None
    values = dict(zip(_LATEST_COLUMNS, found))
    for name in ("usage", "agent_path"):
        if isinstance(values[name], str | bytes):
            values[name] = json.loads(values[name])
    if values["pending_approvals"] is not None:
        values["pending_approvals"] = bytes(values["pending_approvals"])
    row = Checkpoint(**values)
    row._state.adding, row._state.db = False, "default"
    return row


def _checkpoint_values(checkpoint: AgentCheckpoint, run_pk: int | None, head_id: int | None, epoch: int) -> dict[str, Any]:
    """The checkpoint row's field values (a direct save writes them without building the model instance)."""
    pending = checkpoint.get("pending_approvals")
    return {
        "run_id": run_pk,
        "session_key": checkpoint["run_id"],
        "step_index": checkpoint["step_index"],
        "status": checkpoint["status"],
        "usage": dict(checkpoint["usage"]),
        "agent_path": list(checkpoint.get("agent_path") or []),
        "head_id": head_id,
        "message_count": len(checkpoint["messages"]),
        "pending_approvals": seal(_encode(pending)) if pending is not None else None,
        "created_at_ms": checkpoint["created_at"],
        "owner_epoch": epoch,
        "recorded_at": timezone.now(),
    }


_CHECKPOINT_COLUMNS = (
    "run_id", "session_key", "step_index", "status", "usage", "agent_path", "head_id", "message_count",
    "pending_approvals", "created_at_ms", "owner_epoch", "recorded_at",
)


def _saved_row(values: dict[str, Any], pk: int | None) -> Checkpoint:
    """The model instance of a written checkpoint row."""
    row = Checkpoint(**values)
    row.pk = pk
    row._state.adding, row._state.db = False, "default"
    return row


def _checkpoint_params(db: Any, values: dict[str, Any]) -> list[Any]:
    """The row's values as the back end takes them (the adapters its fields' get_db_prep_save would pick)."""
    ops = db.ops
    return [
        values["run_id"], values["session_key"], values["step_index"], values["status"],
        ops.adapt_json_value(values["usage"], None), ops.adapt_json_value(values["agent_path"], None),
        values["head_id"], values["message_count"], values["pending_approvals"], values["created_at_ms"],
        values["owner_epoch"], ops.adapt_datetimefield_value(values["recorded_at"]),
    ]


_SQL: dict[tuple[str, str], str] = {}


def _insert_sql(db: Any, model: Any, columns: tuple[str, ...]) -> str:
    key = (db.vendor, model._meta.db_table)
    sql = _SQL.get(key)
    if sql is None:
        quote = db.ops.quote_name
        sql = (
            f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(quote(column) for column in columns)}) "
            f"VALUES ({', '.join(['%s'] * len(columns))})"
        )
        if db.features.can_return_columns_from_insert:
            sql += " RETURNING id"
        _SQL[key] = sql
    return sql


def _message_sql(db: Any) -> str:
    return _insert_sql(db, RunMessage, ("run_id", "session_key", "parent_id", "position", "data"))


def _checkpoint_sql(db: Any) -> str:
    return _insert_sql(db, Checkpoint, _CHECKPOINT_COLUMNS)


def _insert(db: Any, cursor: Any, sql: str, params: list[Any]) -> int:
    """One row in; its id back from the same statement (RETURNING, or SQLite's last row id)."""
    cursor.execute(sql, params)
    if db.features.can_return_columns_from_insert:
        return cursor.fetchone()[0]
    return cursor.lastrowid
