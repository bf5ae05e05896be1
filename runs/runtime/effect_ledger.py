"""The effect ledger: where effect entries live and how an entry may move (runs.runtime.effects has the rules).

A ledger only stores entries and their transitions, each with its time, owner epoch and actor; the states and the
moves between them are checked here, once, for every ledger (``effect_advance_check``):

  proposed -> approved -> attempted -> committed -> verified
                             |-> failed | unknown -> committed | needs_review
  needs_review -> approved | committed | failed (a person)

``InMemoryEffectLedger`` is the reference ledger (scripts, tests); the database one is
``runs.stores.ledger.DatabaseEffectLedger``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any, Protocol, TypedDict, runtime_checkable

from .deps import Clock, SystemClock
from .exceptions import EffectStateChanged, OwnershipLostError
from .stores import root_run_id

__all__ = [
    "EFFECTS_STOPPED_REASON",
    "EFFECT_STATUSES",
    "EffectEntry",
    "EffectLedger",
    "InMemoryEffectLedger",
    "effect_advance_check",
    "effect_transition_is_allowed",
]

PROPOSED, APPROVED, ATTEMPTED = "proposed", "approved", "attempted"
COMMITTED, VERIFIED, FAILED = "committed", "verified", "failed"
UNKNOWN, NEEDS_REVIEW = "unknown", "needs_review"
EFFECT_STATUSES = (PROPOSED, APPROVED, ATTEMPTED, COMMITTED, VERIFIED, FAILED, UNKNOWN, NEEDS_REVIEW)

#: Where each status may go. Staying put is always allowed: it records an event (a conflict, a reconciliation
#: that found nothing, a stop) without changing the state.
_TRANSITIONS: dict[str | None, frozenset[str]] = {
    None: frozenset({PROPOSED}),
    PROPOSED: frozenset({APPROVED, ATTEMPTED}),
    APPROVED: frozenset({ATTEMPTED}),
    ATTEMPTED: frozenset({COMMITTED, FAILED, UNKNOWN, NEEDS_REVIEW}),
    UNKNOWN: frozenset({COMMITTED, NEEDS_REVIEW}),
    COMMITTED: frozenset({VERIFIED, NEEDS_REVIEW}),
    NEEDS_REVIEW: frozenset({APPROVED, COMMITTED, FAILED}),
    FAILED: frozenset(),
    VERIFIED: frozenset(),
}

EFFECTS_STOPPED_REASON = "effects are stopped"


def effect_transition_is_allowed(current: str | None, new: str) -> bool:
    """Whether a ledger entry in ``current`` may move to ``new`` (the same status records an event)."""
    return new == current or new in _TRANSITIONS.get(current, frozenset())


def effect_advance_check(operation_id: str, *, current: str, expected: str, status: str) -> None:
    """A ledger's check before it moves an entry from ``expected`` to ``status``: EffectStateChanged if the entry
    is ``current`` instead (another writer moved it), ValueError if the states forbid the move."""
    if current != expected:
        raise EffectStateChanged(f"Operation {operation_id} is {current}, not {expected}.")
    if not effect_transition_is_allowed(expected, status):
        raise ValueError(f"An effect cannot go from {expected} to {status}.")



class EffectEntry(TypedDict, total=False):
    """A ledger entry: one operation, its request, state and outcome."""

    operation_id: str
    run_id: str | None
    tool_call_id: str
    tool_name: str
    fingerprint: str
    input: dict[str, Any]
    status: str
    output: Any
    error: str
    attempts: int
    epoch: int
    approval: dict[str, Any] | None
    outcome_source: str
    settled_at: int | None  # ms, when it was last written (the moment a replayed outcome was recorded)
    transitions: list[dict[str, Any]]


@runtime_checkable
class EffectLedger(Protocol):
    """Where effect entries live. Methods may be sync or async; a fenced ledger raises OwnershipLostError for a
    write from an owner epoch that is no longer the run's."""

    epoch: int

    def get(self, operation_id: str) -> EffectEntry | None | Awaitable[EffectEntry | None]: ...

    def open(self, entry: EffectEntry) -> EffectEntry | Awaitable[EffectEntry]:
        """The stored entry of ``entry``'s operation id, created ``proposed`` from ``entry`` when absent."""

    def advance(
        self,
        operation_id: str,
        *,
        expected: str,
        status: str,
        via: str,
        note: str = "",
        evidence: Any = None,
        changes: Mapping[str, Any] | None = None,
    ) -> EffectEntry | Awaitable[EffectEntry]:
        """Move the entry from ``expected`` (EffectStateChanged otherwise) to ``status``, applying ``changes``
        (output, error, attempts, approval, outcome_source) and recording the transition."""

    def stopped_reason(self, *, tool_name: str) -> str | None | Awaitable[str | None]:
        """Why no new effect may start now (a stop switch is on), or None."""


class InMemoryEffectLedger:
    """The reference ledger: entries and their transitions in memory, owner epochs kept like the in-memory
    session store's (``claim``, ``fenced``), a stop switch (``stop``, ``release``). For scripts and tests."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._entries: dict[str, EffectEntry] = {}
        self._owners: dict[str, int] = {}
        self._stop: dict[str, str | None] = {"reason": None}
        self.clock: Clock = clock or SystemClock()
        self.fence: tuple[str, int] | None = None

    @property
    def epoch(self) -> int:
        return self.fence[1] if self.fence is not None else 0

    def claim(self, run_id: str) -> int:
        """Take ``run_id`` over: its owner epoch goes up by one, so older fenced views are refused."""
        self._owners[run_id] = self._owners.get(run_id, 0) + 1
        return self._owners[run_id]

    def fenced(self, run_id: str, epoch: int, **context: Any) -> InMemoryEffectLedger:
        """A view of this ledger that writes only while ``epoch`` owns ``run_id`` (a database ledger's ``context``,
        the agent and the worker, is not kept here)."""
        view = InMemoryEffectLedger.__new__(InMemoryEffectLedger)
        view._entries, view._owners, view._stop, view.clock = self._entries, self._owners, self._stop, self.clock
        view.fence = (run_id, epoch)
        return view

    def stop(self, reason: str = EFFECTS_STOPPED_REASON) -> None:
        self._stop["reason"] = reason

    def release(self) -> None:
        self._stop["reason"] = None

    def entries(self) -> list[EffectEntry]:
        """Every entry, in the order they were opened (copies)."""
        return [_copy(entry) for entry in self._entries.values()]

    def _check_owner(self, run_id: str | None, *, moves: bool = True) -> None:
        """This view's epoch still owns its run; and, for a write that ``moves`` an entry, the entry is its run's
        (another run records events on it, a replay or a conflict, and never moves it)."""
        if self.fence is None:
            return
        fenced_id, epoch = self.fence
        if moves and run_id is not None and root_run_id(run_id) != fenced_id:
            raise ValueError(f"This ledger is fenced to run {fenced_id!r}, not {root_run_id(run_id)!r}.")
        if self._owners.get(fenced_id, 0) != epoch:
            raise OwnershipLostError(f"Run {fenced_id!r} is no longer owned by epoch {epoch}.")

    def get(self, operation_id: str) -> EffectEntry | None:
        entry = self._entries.get(operation_id)
        return _copy(entry) if entry is not None else None

    def open(self, entry: EffectEntry) -> EffectEntry:
        self._check_owner(entry.get("run_id"))
        stored = self._entries.get(entry["operation_id"])
        if stored is None:
            stored = {
                "output": None, "error": "", "attempts": 0, "approval": None, "outcome_source": "",
                **entry, "status": PROPOSED, "epoch": self.epoch, "settled_at": self.clock.now(), "transitions": [],
            }
            stored["transitions"].append(self._transition(None, PROPOSED, via="tool", note="", evidence=None))
            self._entries[entry["operation_id"]] = stored
        return _copy(stored)

    def advance(
        self,
        operation_id: str,
        *,
        expected: str,
        status: str,
        via: str,
        note: str = "",
        evidence: Any = None,
        changes: Mapping[str, Any] | None = None,
    ) -> EffectEntry:
        entry = self._entries[operation_id]
        moves = status != expected
        self._check_owner(entry.get("run_id"), moves=moves)
        if not moves:  # an event (a replay, a conflict, a reconciliation that found nothing) keeps whatever is there
            expected = status = entry["status"]
        effect_advance_check(operation_id, current=entry["status"], expected=expected, status=status)
        entry.update(changes or {})
        if status != expected:
            entry["status"], entry["epoch"], entry["settled_at"] = status, self.epoch, self.clock.now()
        entry["transitions"].append(self._transition(expected, status, via=via, note=note, evidence=evidence))
        return _copy(entry)

    def stopped_reason(self, *, tool_name: str) -> str | None:
        return self._stop["reason"]

    def _transition(self, old: str | None, new: str, *, via: str, note: str, evidence: Any) -> dict[str, Any]:
        return {"from": old, "to": new, "epoch": self.epoch, "actor": "worker", "via": via, "note": note,
                "evidence": evidence, "at": self.clock.now()}

    def __repr__(self) -> str:
        return f"InMemoryEffectLedger({len(self._entries)} entries)"


def _copy(entry: EffectEntry) -> EffectEntry:
    copied: EffectEntry = dict(entry)  # type: ignore[assignment]
    if "transitions" in entry:
        copied["transitions"] = [dict(item) for item in entry["transitions"]]
    return copied

