"""DatabaseStreamStateStore: the runtime's StreamStateStore on the ORM, fenced by owner epoch like every write."""

from __future__ import annotations

import json
from collections.abc import Sequence
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any

from django.db import connection, transaction
from django.db.models import Max, Subquery
from django.utils import timezone

from runs.errors import StaleOwnerError
from runs.ownership.fencing import OwnerFence
from runs.models import JournalEntry, Run
from runs.runtime.codec import decode_value, encode_value
from runs.runtime.types import StreamPart
from runs.runtime.wire import JournalPage
from runs.secrets.sealing import seal_text, unseal_text
from runs.stores.dispatch import dispatch

__all__ = ["DatabaseStreamStateStore", "part_decode", "part_decode_plain"]


class DatabaseStreamStateStore:
    """Journals in the database. A fenced view checks the owner epoch in each append's transaction."""

    def __init__(self, *, fence: OwnerFence | None = None) -> None:
        self.fence = fence

    def __repr__(self) -> str:
        return f"DatabaseStreamStateStore(fence={self.fence!r})"

    def fenced(self, stream_id: str, epoch: int) -> DatabaseStreamStateStore:
        return DatabaseStreamStateStore(fence=OwnerFence(stream_id, epoch))

    def append(
        self, stream_id: str, parts: Sequence[StreamPart], *, end_leg: bool = False, first_seq: int | None = None,
        encoded: Sequence[str] | None = None,
    ) -> Any:
        return dispatch(self.append_sync, stream_id, parts, end_leg, first_seq=first_seq, encoded=encoded)

    def read(self, stream_id: str, *, after: int = -1, limit: int = 1000) -> Any:
        return dispatch(self.read_sync, stream_id, after, limit)

    def last_seq(self, stream_id: str) -> Any:
        return dispatch(self.last_seq_sync, stream_id)

    # ------------------------------------------------------------------ writes

    def append_sync(
        self, stream_id: str, parts: Sequence[StreamPart], end_leg: bool = False, *, first_seq: int | None = None,
        encoded: Sequence[str] | None = None,
    ) -> int:
        """Append in one transaction; ``first_seq`` saves a query when the caller keeps count, ``encoded`` (the
        parts' ``encode_parts``) an encoding when the caller needs the texts too. Returns the last seq."""
        # No savepoint inside a checkpoint's transaction (the save hook): there a failed append fails the save.
        with transaction.atomic(savepoint=not (self.fence is not None and self.fence.is_held())):
            run_pk, epoch = self._owned(stream_id)
            if first_seq is None:
                first_seq = _last_seq(run_pk) + 1
            now = connection.ops.adapt_datetimefield_value(timezone.now())
            texts = self.encode_parts(parts) if encoded is None else encoded
            rows = [(run_pk, first_seq + offset, False, text, epoch, now) for offset, text in enumerate(texts)]
            last = first_seq + len(rows) - 1
            if end_leg:
                rows.append((run_pk, last, True, "", epoch, now))
            _insert(rows)
        return last

    def append_direct(
        self, cursor: Any, run_pk: int, parts: Sequence[StreamPart], *, first_seq: int,
        encoded: Sequence[str] | None = None,
    ) -> int:
        """``append`` on a sqlite3 cursor of runs.stores.direct_sqlite, inside a transaction that holds the run's
        fence already (a direct checkpoint save); returns the last seq."""
        rows = self.rows_for(run_pk, parts, first_seq=first_seq, encoded=encoded)
        cursor.executemany(f"INSERT INTO {JournalEntry._meta.db_table} ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", rows)
        return first_seq + len(rows) - 1

    def rows_for(
        self, run_pk: int, parts: Sequence[StreamPart], *, first_seq: int, encoded: Sequence[str] | None = None
    ) -> list[tuple[Any, ...]]:
        """The journal rows of ``parts`` from ``first_seq`` on, encoded and sealed, as a fenced write inserts them
        (run, seq, is_sentinel, part, owner_epoch, created_at): a PostgreSQL save folds them into its statement."""
        assert self.fence is not None, "a direct append is a fenced view's"
        now = connection.ops.adapt_datetimefield_value(timezone.now())
        epoch = self.fence.epoch
        texts = self.encode_parts(parts) if encoded is None else encoded
        return [(run_pk, first_seq + offset, False, text, epoch, now) for offset, text in enumerate(texts)]

    @staticmethod
    def encode_parts(parts: Sequence[StreamPart]) -> list[str]:
        """The journal texts of ``parts``, as stored (sealed when encryption keys are set): a writer that encodes
        once hands them to the append and to the followers' notification (runs.wire.writer)."""
        return [_encode_part(part) for part in parts]

    def _owned(self, run_id: str) -> tuple[int, int]:
        """The run's primary key and epoch; fenced, only while the fence's epoch owns the run (the check also
        takes the run's row lock until the append commits)."""
        if self.fence is None:
            row = Run.objects.filter(run_id=run_id).values_list("pk", "owner_epoch").first()
            if row is None:
                raise StaleOwnerError(run_id, None)
            return row
        if self.fence.run_id != run_id:
            raise ValueError(f"This journal store is fenced to run {self.fence.run_id!r}, not {run_id!r}.")
        return self.fence.hold(), self.fence.epoch

    def last_seq_sync(self, stream_id: str) -> int:
        # One statement: the run's key as a subquery (a join would lose the index's backward MAX).
        return _last_seq(Subquery(Run.objects.filter(run_id=stream_id).values("pk")[:1]))

    # ------------------------------------------------------------------- reads

    def read_sync(self, stream_id: str, after: int = -1, limit: int = 1000) -> JournalPage:
        return self.read_texts_sync(stream_id, after, limit)[0]

    def read_texts_sync(self, stream_id: str, after: int = -1, limit: int = 1000) -> tuple[JournalPage, dict[int, str]]:
        """``read_sync``, and each part's plain JSON text as the journal holds it (``part_decode_plain``), for a
        wire that sends the text as it is rather than encoding the part again."""
        run_pk = Run.objects.filter(run_id=stream_id).values_list("pk", flat=True).first()
        if run_pk is None:
            return JournalPage(parts=[], last_seq=-1, is_closed=False), {}
        rows = list(
            JournalEntry.objects.filter(run_id=run_pk, is_sentinel=False, seq__gt=after)
            .order_by("seq")
            .values_list("seq", "part")[: limit + 1]
        )
        last = _last_seq(run_pk)
        sentinel = (
            JournalEntry.objects.filter(run_id=run_pk, is_sentinel=True).order_by("-id").values_list("seq", flat=True).first()
        )
        decoded = [(seq, *part_decode_plain(text)) for seq, text in rows[:limit]]
        page = JournalPage(
            parts=[(seq, part) for seq, part, _ in decoded],
            last_seq=last,
            is_closed=sentinel is not None and sentinel == last,
            has_more=len(rows) > limit,
        )
        return page, {seq: plain for seq, _, plain in decoded}


def part_decode(text: str) -> StreamPart:
    """A part from its journal text (``encode_parts``): as a read of the journal answers it."""
    return decode_value(json.loads(unseal_text(text)))


def part_decode_plain(text: str) -> tuple[StreamPart, str]:
    """``part_decode``, and the part's plain JSON text (unsealed): the compact JSON of its codec encoding, as
    runs.wire.followers.part_json writes it, for a wire that sends it as it is."""
    plain = unseal_text(text)
    return decode_value(json.loads(plain)), plain


def _last_seq(run_pk: int | Subquery) -> int:
    last = JournalEntry.objects.filter(run_id=run_pk, is_sentinel=False).aggregate(last=Max("seq"))["last"]
    return -1 if last is None else last


_COLUMNS = "run_id, seq, is_sentinel, part, owner_epoch, created_at"
_VALUES_ROWS = 100  # up to this many rows an INSERT with VALUES; more go through COPY


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _encode_part(part: StreamPart) -> str:
    """JSON text of a part, sealed when encryption keys are set. Text deltas (most parts) hold only strings, so
    they skip the codec's walk."""
    text = part.get("text")
    if part.get("type") == "text-delta" and len(part) == 2 and type(text) is str:
        return seal_text('{"type":"text-delta","text":' + encode_basestring(text) + "}")
    return seal_text(_ENCODER.encode(encode_value(part)))


def _insert(rows: list[tuple]) -> None:
    """Many journal rows in one round trip: COPY on PostgreSQL, executemany elsewhere."""
    if not rows:
        return
    table = JournalEntry._meta.db_table
    connection.ensure_connection()
    if connection.vendor == "postgresql" and len(rows) <= _VALUES_ROWS:
        # A step's parts (a checkpoint's journal flush) in one INSERT: one round trip, where COPY takes two.
        values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(rows))
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {table} ({_COLUMNS}) VALUES {values}", [value for row in rows for value in row])
        return
    if connection.vendor == "postgresql":
        with connection.connection.cursor() as cursor:
            with cursor.copy(f"COPY {table} ({_COLUMNS}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        return
    with connection.connection.cursor() if connection.vendor != "sqlite" else _sqlite_cursor() as cursor:
        placeholders = ", ".join(["%s" if connection.vendor != "sqlite" else "?"] * 6)
        cursor.executemany(f"INSERT INTO {table} ({_COLUMNS}) VALUES ({placeholders})", rows)


class _sqlite_cursor:
    """The raw sqlite3 cursor of Django's connection (sqlite3 cursors are not context managers)."""

    def __enter__(self):
        self.cursor = connection.connection.cursor()
        return self.cursor

    def __exit__(self, *exc):
        self.cursor.close()
