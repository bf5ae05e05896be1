"""Owner-epoch fencing, written once: every write on behalf of a worker goes through ``OwnerFence.hold``.

A claim increments a run's owner epoch. Each write of a leg (checkpoint, journal, effect, lease, the leg's
close) first runs one UPDATE of the run's row guarded by the epoch the writer holds, in the write's own
transaction: it proves the writer still owns the run and takes the row lock until the write commits, so a
takeover cannot interleave. A stale writer gets StaleOwnerError and must abandon the run.
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.utils import timezone

from runs.errors import StaleOwnerError
from runs.models import Run

__all__ = ["OwnerFence"]


class OwnerFence:
    """The right of the worker holding ``epoch`` to write for ``run_id``."""

    __slots__ = ("epoch", "run_id", "_run_pk")

    def __init__(self, run_id: str, epoch: int) -> None:
        self.run_id = run_id
        self.epoch = epoch
        self._run_pk: int | None = None

    def __repr__(self) -> str:
        return f"OwnerFence({self.run_id!r}, epoch={self.epoch})"

    @property
    def run_pk(self) -> int:
        """The run's primary key (looked up once; a run's key never changes)."""
        if self._run_pk is None:
            pk = Run.objects.filter(run_id=self.run_id).values_list("pk", flat=True).first()
            if pk is None:
                raise StaleOwnerError(self.run_id, self.epoch)
            self._run_pk = pk
        return self._run_pk

    def hold(self, **changes: Any) -> int:
        """Check the epoch and lock the run's row in the caller's transaction, applying ``changes`` to the run in
        the same statement; returns the run's primary key. Raises StaleOwnerError when another epoch owns it."""
        now = timezone.now()
        if changes:
            updated = Run.objects.filter(pk=self.run_pk, owner_epoch=self.epoch).update(updated_at=now, **changes)
        else:  # the hot path (every journal batch, every checkpoint): one plain statement
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {Run._meta.db_table} SET updated_at = %s WHERE id = %s AND owner_epoch = %s",
                    [connection.ops.adapt_datetimefield_value(now), self.run_pk, self.epoch],
                )
                updated = cursor.rowcount
        if updated != 1:
            raise StaleOwnerError(self.run_id, self.epoch)
        return self.run_pk
