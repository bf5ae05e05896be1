"""DatabaseStreamStateStore: the runtime's StreamStateStore on the ORM, fenced by owner epoch like every write."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from runs.errors import StaleOwnerError
from runs.models import JournalEntry, Run
from runs.runtime.codec import decode_value, encode_value
from runs.runtime.types import StreamPart
from runs.runtime.wire import JournalPage
from runs.stores.db import _dispatch

__all__ = ["DatabaseStreamStateStore"]


class DatabaseStreamStateStore:
    """Journals in the database. With a fence, each append checks the owner epoch in its own transaction."""

    def __init__(self, *, fence: tuple[str, int] | None = None) -> None:
        self.fence = fence

    def fenced(self, run_id: str, epoch: int) -> DatabaseStreamStateStore:
        return DatabaseStreamStateStore(fence=(run_id, epoch))

    def append(self, stream_id: str, parts: Sequence[StreamPart], *, end_leg: bool = False) -> Any:
        return _dispatch(self.append_sync, stream_id, parts, end_leg)

    def read(self, stream_id: str, *, after: int = -1, limit: int = 1000) -> Any:
        return _dispatch(self.read_sync, stream_id, after, limit)

    # ------------------------------------------------------------------ writes

    def append_sync(
        self, stream_id: str, parts: Sequence[StreamPart], end_leg: bool = False, *, first_seq: int | None = None
    ) -> int:
        """Append in one transaction; ``first_seq`` saves a query when the caller keeps count. Returns the last seq."""
        with transaction.atomic():
            run_pk, epoch = self._owned(stream_id)
            if first_seq is None:
                first_seq = self.last_seq(run_pk) + 1
            rows = [
                JournalEntry(run_id=run_pk, seq=first_seq + offset, part=encode_value(part), owner_epoch=epoch)
                for offset, part in enumerate(parts)
            ]
            last = first_seq + len(rows) - 1
            if end_leg:
                rows.append(JournalEntry(run_id=run_pk, seq=last, is_sentinel=True, owner_epoch=epoch))
            JournalEntry.objects.bulk_create(rows, batch_size=500)
        return last

    def _owned(self, run_id: str) -> tuple[int, int]:
        """The run's primary key and epoch; with a fence, only while the fence's epoch owns the run."""
        runs = Run.objects.filter(run_id=run_id)
        if self.fence is not None:
            fenced_id, epoch = self.fence
            if fenced_id != run_id:
                raise ValueError(f"This journal store is fenced to run {fenced_id!r}, not {run_id!r}.")
            if not runs.filter(owner_epoch=epoch).update(updated_at=timezone.now()):
                raise StaleOwnerError(run_id, epoch)
        row = runs.values_list("pk", "owner_epoch").first()
        if row is None:
            raise StaleOwnerError(run_id, None)
        return row

    @staticmethod
    def last_seq(run_pk: int) -> int:
        last = JournalEntry.objects.filter(run_id=run_pk, is_sentinel=False).aggregate(last=Max("seq"))["last"]
        return -1 if last is None else last

    # ------------------------------------------------------------------- reads

    def read_sync(self, stream_id: str, after: int = -1, limit: int = 1000) -> JournalPage:
        run_pk = Run.objects.filter(run_id=stream_id).values_list("pk", flat=True).first()
        if run_pk is None:
            return JournalPage(parts=[], last_seq=-1, is_closed=False)
        rows = list(
            JournalEntry.objects.filter(run_id=run_pk, is_sentinel=False, seq__gt=after)
            .order_by("seq")
            .values_list("seq", "part")[: limit + 1]
        )
        last = self.last_seq(run_pk)
        sentinel = (
            JournalEntry.objects.filter(run_id=run_pk, is_sentinel=True).order_by("-id").values_list("seq", flat=True).first()
        )
        return JournalPage(
            parts=[(seq, decode_value(part)) for seq, part in rows[:limit]],
            last_seq=last,
            is_closed=sentinel is not None and sentinel == last,
            has_more=len(rows) > limit,
        )
