"""Owner-epoch fencing, written once: every write on behalf of a worker goes through ``OwnerFence.hold``.

A claim increments a run's owner epoch. Each write of a leg (checkpoint, journal, effect, lease, the leg's
close) first runs one UPDATE of the run's row guarded by the epoch the writer holds, in the write's own
transaction: it proves the writer still owns the run and takes the row lock until the write commits, so a
takeover cannot interleave. A stale writer gets StaleOwnerError and must abandon the run. The UPDATE can carry
other changes to the run (a checkpoint's step and usage mirror), so fencing costs no statement of its own.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import BigIntegerField, IntegerField, JSONField, PositiveIntegerField
from django.utils import timezone

from runs.errors import StaleOwnerError
from runs.models import Run

__all__ = ["OwnerFence", "adapt_run_field", "fence_run_pk_claimed"]

# (run id, epoch) pairs whose fence this thread's open transaction already holds, with the run's key as the fence
# that holds it knew it (see OwnerFence.nested).
_held = threading.local()

# The run's key for each recent (run id, epoch), as its claim (runs.services.lifecycle.run_claim) or a hold found
# it: the fences of a leg (checkpoints, journal, ledger, lease, close) start knowing it instead of each looking it
# up. Only ``hold`` trusts it, and its UPDATE names the run id too, so a wrong key (a run deleted and created again
# under its id) matches no row: the fence then looks the key up, as it did before.
_claimed_pks: dict[tuple[str, int], int] = {}
_claimed_lock = threading.Lock()
_CLAIMED_KEEP = 4096


def fence_run_pk_claimed(run_id: str, epoch: int, pk: int) -> None:
    """Remember that claiming ``run_id`` for ``epoch`` found its row's key ``pk``."""
    with _claimed_lock:
        _claimed_pks[(run_id, epoch)] = pk
        while len(_claimed_pks) > _CLAIMED_KEEP:
            del _claimed_pks[next(iter(_claimed_pks))]


class OwnerFence:
    """The right of the worker holding ``epoch`` to write for ``run_id``."""

    __slots__ = ("_claimed_pk", "_run_pk", "epoch", "run_id")

    def __init__(self, run_id: str, epoch: int) -> None:
        self.run_id = run_id
        self.epoch = epoch
        self._run_pk: int | None = None  # known for sure: looked up, or checked by a hold
        self._claimed_pk = _claimed_pks.get((run_id, epoch))  # what the claim found, until a hold checks it

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
        """Check the epoch and lock the run's row in the caller's transaction, applying ``changes`` (run fields) in
        the same statement; returns the run's primary key. Raises StaleOwnerError when another epoch owns it."""
        if not changes and self.is_held():
            # This transaction already checked it and holds the row lock, and the key it checked is remembered.
            if self._run_pk is None:  # the key the fence that holds it knew, or else looked up
                self._run_pk = _held_keys().get((self.run_id, self.epoch)) or self.run_pk
            return self._run_pk
        db = connections[DEFAULT_DB_ALIAS]  # the thread's wrapper, looked up once (the proxy costs per access)
        claimed = self._run_pk is None and self._claimed_pk is not None
        pk = self._claimed_pk if claimed else self.run_pk
        with db.cursor() as cursor:
            cursor.execute(_update_sql_for(db.vendor, tuple(changes)), self._params(db, changes, pk))
            updated = cursor.rowcount
        if updated != 1 and claimed:
            self._claimed_pk = None  # not this run's row (any more): look its key up and try again
            with _claimed_lock:
                _claimed_pks.pop((self.run_id, self.epoch), None)
            return self.hold(**changes)
        if updated != 1:
            raise StaleOwnerError(self.run_id, self.epoch)
        self._run_pk = pk
        if not claimed and _claimed_pks.get((self.run_id, self.epoch)) != pk:
            fence_run_pk_claimed(self.run_id, self.epoch, pk)  # checked: the fences of this epoch may start from it
        return pk

    def hold_direct(self, cursor: Any, **changes: Any) -> int:
        """``hold`` on a sqlite3 cursor of runs.stores.direct (the event loop's own connection, in its open
        transaction). Needs the run's key known already: the loop's thread may not query through the ORM."""
        if self._run_pk is None:
            raise LookupError("The run's key is not known yet; the first write of a fence goes through the ORM.")
        db = connections[DEFAULT_DB_ALIAS]
        cursor.execute(_update_sql_for(db.vendor, tuple(changes)).replace("%s", "?"),
                       self._params(db, changes, self._run_pk))
        if cursor.rowcount != 1:
            raise StaleOwnerError(self.run_id, self.epoch)
        return self._run_pk

    @property
    def knows_run_pk(self) -> bool:
        return self._run_pk is not None

    def _params(self, db: Any, changes: dict[str, Any], pk: int) -> list[Any]:
        params = [db.ops.adapt_datetimefield_value(timezone.now())]
        params += [adapt_run_field(db, name, value) for name, value in changes.items()]
        params += [pk, self.run_id, self.epoch]
        return params

    def is_held(self) -> bool:
        """Whether this thread's open transaction holds this fence already (inside ``nested``)."""
        return (self.run_id, self.epoch) in _held_keys() and connection.in_atomic_block

    @contextmanager
    def nested(self) -> Iterator[None]:
        """Inside a transaction that has just held this fence: writes for the same run and epoch made in the block
        (a save hook's journal flush) skip their own check, which this transaction made and whose lock it keeps."""
        keys = _held_keys()
        key = (self.run_id, self.epoch)
        if key in keys:
            yield
            return
        keys[key] = self._run_pk  # a key this fence checked (or looked up), for the writes in the block
        try:
            yield
        finally:
            keys.pop(key, None)


@functools.cache
def _update_sql_for(vendor: str, names: tuple[str, ...]) -> str:
    quote = connection.ops.quote_name
    sets = ["updated_at = %s", *(f"{quote(Run._meta.get_field(name).column)} = %s" for name in names)]
    return f"UPDATE {quote(Run._meta.db_table)} SET {', '.join(sets)} WHERE id = %s AND run_id = %s AND owner_epoch = %s"


def adapt_run_field(db: Any, name: str, value: Any) -> Any:
    """``value`` for the run's field ``name`` as the back end takes it (JSON and dates adapted, the rest as is)."""
    if value is None:
        return None
    field, kind = _run_field(name)
    if kind == "json":
        return db.ops.adapt_json_value(value, field.encoder)
    if kind == "integer" and type(value) is int:
        return value  # what an integer field's get_db_prep_save answers for an int, without its calls
    return field.get_db_prep_save(value, connection=db)


@functools.cache
def _run_field(name: str) -> tuple[Any, str]:
    field = Run._meta.get_field(name)
    if isinstance(field, JSONField):
        return field, "json"
    return field, ("integer" if type(field) in _INTEGER_FIELDS else "other")


_INTEGER_FIELDS = (IntegerField, PositiveIntegerField, BigIntegerField)


def _held_keys() -> dict[tuple[str, int], int | None]:
    """This thread's held fences: (run id, epoch) -> the run's key as the holding fence knew it (None: unknown)."""
    keys = getattr(_held, "keys", None)
    if keys is None:
        keys = _held.keys = {}
    return keys
