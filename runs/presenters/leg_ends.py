"""How each leg of a run ended, as people are told: finished (its own end and finish reason), still running, or
interrupted. The one place that says it, for the run's page, its Steps, `runs show` and the API's legs.

A worker that dies mid-leg (SIGKILL, a lost machine, a pause past its lease) never writes its leg's end, so a leg
whose ``ended_at`` is null is dead once a later leg of the run exists or the run is no longer running. Its end is
then when its death was detected: the next leg's start (the new owner's claim), or, with no next leg, the run's
last change. Its last sign of life is the last journal part or checkpoint its owner epoch wrote (its start when
it wrote none); the gap between the two is how long the run stood still.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runs.models import Leg, Run
from runs.selectors import run_leg_signs_of_life

__all__ = ["LegEnd", "duration_text", "interruption_text", "run_leg_ends"]

RUNNING, FINISHED, INTERRUPTED = "running", "finished", "interrupted"


@dataclass(frozen=True)
class LegEnd:
    """A leg with its end as people see it: ``state`` is running, finished or interrupted; for an interrupted leg,
    ``last_seen_at`` (its last journal part or checkpoint), ``detected_at`` (when its death was detected),
    ``last_step`` (the last step of the run it checkpointed, None if none) and ``next_leg`` (the leg that went on,
    None if none did)."""

    leg: Leg
    state: str
    last_seen_at: datetime | None = None
    detected_at: datetime | None = None
    last_step: int | None = None
    next_leg: Leg | None = None

    def __getattr__(self, name: str) -> Any:
        # Only called for names the dataclass lacks: the leg's own fields (number, kind, ended_at as stored...),
        # so the API's leg serializer reads a LegEnd as it reads a Leg.
        if name == "leg":
            raise AttributeError(name)
        return getattr(self.leg, name)

    @property
    def is_interrupted(self) -> bool:
        return self.state == INTERRUPTED

    @property
    def interruption(self) -> LegEnd | None:
        """Itself when the leg was interrupted (what the API's ``interruption`` reads), else None."""
        return self if self.is_interrupted else None

    @property
    def end_at(self) -> datetime | None:
        """The leg's own end, or when its death was detected; None while it runs."""
        return self.detected_at if self.is_interrupted else self.leg.ended_at

    @property
    def next_leg_number(self) -> int | None:
        return None if self.next_leg is None else self.next_leg.number

    @property
    def finish(self) -> str:
        """Its finish reason; "interrupted" for a dead leg; empty while it runs."""
        return INTERRUPTED if self.is_interrupted else self.leg.finish_reason

    @property
    def gap_seconds(self) -> float | None:
        """How long the run stood still: from the dead leg's last sign of life to the detection of its death."""
        if not self.is_interrupted or self.last_seen_at is None or self.detected_at is None:
            return None
        return max((self.detected_at - self.last_seen_at).total_seconds(), 0.0)

    @property
    def stopped_where(self) -> str:
        """Where in the run an interrupted leg stopped: "after step 3", or before it checkpointed any."""
        return "before it checkpointed a step" if self.last_step is None else f"after step {self.last_step}"

    @property
    def summary(self) -> str:
        """An interrupted leg's end in a few words, for the legs table: "stopped after step 3; leg 4 took over
        14 s later"."""
        if not self.is_interrupted:
            return ""
        gap = duration_text(self.gap_seconds or 0.0)
        if self.next_leg is not None:
            return f"stopped {self.stopped_where}; leg {self.next_leg.number} took over {gap} later"
        return f"stopped {self.stopped_where}; detected {gap} later"


def run_leg_ends(run: Run, legs: list[Leg]) -> list[LegEnd]:
    """``legs`` (the run's, in order) with their ends; two queries when a leg is dead, none otherwise."""
    dead = [
        index for index, leg in enumerate(legs)
        if leg.ended_at is None and (index < len(legs) - 1 or run.status != Run.Status.RUNNING)
    ]
    seen = run_leg_signs_of_life(run=run, epochs=[legs[index].owner_epoch for index in dead])
    ends = []
    for index, leg in enumerate(legs):
        if index not in dead:
            ends.append(LegEnd(leg, RUNNING if leg.ended_at is None else FINISHED))
            continue
        next_leg = legs[index + 1] if index + 1 < len(legs) else None
        last_seen_at, last_step = seen.get(leg.owner_epoch, (leg.started_at, None))
        detected_at = next_leg.started_at if next_leg is not None else run.updated_at
        ends.append(LegEnd(leg, INTERRUPTED, last_seen_at=min(last_seen_at, detected_at), detected_at=detected_at,
                           last_step=last_step, next_leg=next_leg))
    return ends


def duration_text(seconds: float) -> str:
    """A gap as people say it: "14 s", "3 min 5 s", "2 h 10 min"."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s" if whole % 60 else f"{whole // 60} min"
    return f"{whole // 3600} h {whole % 3600 // 60} min" if whole % 3600 // 60 else f"{whole // 3600} h"


def interruption_text(end: LegEnd, run: Run) -> str:
    """What happened to an interrupted leg, in one sentence: "worker vm:1 stopped after step 3 (last seen
    12:01:03 UTC); recovered 14 s later by worker vm:2 (leg 2)"."""
    text = (f"worker {end.leg.worker_id or '-'} stopped {end.stopped_where} "
            f"(last seen {end.last_seen_at:%H:%M:%S} UTC)")
    gap = duration_text(end.gap_seconds or 0.0)
    if end.next_leg is not None:
        verb = "recovered" if end.next_leg.kind == Leg.Kind.RECOVERY else "continued"
        return (f"{text}; {verb} {gap} later by worker {end.next_leg.worker_id or '-'} "
                f"(leg {end.next_leg.number})")
    return f"{text}; not resumed: the run is {run.get_status_display().lower()} ({gap} later)"
