"""Model calls, tool calls and step durations, counted from the runs' journals.

Every part a run emits is journaled by whichever process ran its leg, in the transaction of its checkpoint, so the
journal is the durable record of what every process did, a SIGKILLed one included. Counting it on the hot path
would cost each step a write; instead the parts are folded into tallies after the fact, in journal order, from a
stored cursor (JournalFold): a scrape folds what is new (at most ``BATCH`` parts a call, written at least
``SETTLE`` ago), and a prune folds a run's journal before deleting it, so the totals outlive the parts.

- a model call per step (``step-start``), by the provider of the run's agent (its model's class) and outcome:
  ``ok`` when its first tool call or its step's end comes, ``error`` when an error part comes first,
  ``interrupted`` when the step starts again (its leg died) or the leg ends with no answer (a cancel);
- a tool call per ``tool-result`` part, by tool name: ``ok``, ``error``, or ``denied`` (its verdict denied it,
  so the tool never ran; the verdict's part comes right before the result's, so only a fold batch cut between the
  two counts such a result as an ``error``);
- a top-level step's duration from its ``step-start`` to its ``step-finish`` part (the times their journal rows
  were written: the writer flushes every few milliseconds), as a histogram.

A sub-agent's calls count (its parts carry ``agent_path``); its steps are inside its parent's, so only the
top-level agent's steps are timed.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from observability.models import JournalFold, Tally
from observability.providers import model_provider_name
from runs.agents import agent_build
from runs.models import JournalEntry
from runs.stores.streams import part_decode

__all__ = ["BATCH", "SETTLE", "STEP_BUCKETS", "fold_before_prune", "tallies_fold"]

logger = logging.getLogger("deuz.observability")

#: At most this many journal parts are folded in one call.
BATCH = 20_000
#: Upper bounds (seconds) of the step duration histogram's buckets.
STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
#: How old a journal row must be to be folded (module docstring, and tallies_fold).
SETTLE = timedelta(seconds=10)
#: A step-start with no step-finish this long after it (its leg died) is forgotten.
_OPEN_STEP_DAYS = 1


@functools.cache
def _agent_provider(agent: str) -> str:
    """The provider of ``agent``'s model, from a definition built once per process (``unknown`` when the agent
    can no longer be built: renamed, removed, broken)."""
    try:
        return model_provider_name(agent_build(agent).model)
    except Exception:  # a factory is the deployer's code: any failure means we cannot tell
        logger.warning("Cannot tell the provider of agent %r for the metrics", agent, exc_info=True)
        return "unknown"


class _Fold:
    """The tallies of one batch of parts, and the steps still open after it (by run and agent path: [the
    step-start's time, whether its model call has answered])."""

    def __init__(self, open_steps: dict[str, list]) -> None:
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self.totals: Counter[tuple[str, str, str]] = Counter()
        self.open_steps = open_steps
        self.denied: set[tuple[int, str]] = set()  # (run pk, tool call id) of the verdicts denying a call

    def add(self, agent: str, run_pk: int, part: dict, at: datetime) -> None:
        kind, path = part.get("type"), part.get("agent_path") or []
        key = "/".join([str(run_pk), *path])
        if kind == "step-start":
            if key in self.open_steps and not self.open_steps[key][1]:
                self._model_call(agent, "interrupted")  # its leg died waiting for the model: it starts again
            self.open_steps[key] = [at.timestamp(), False]
        elif kind in ("tool-call", "step-finish", "error"):
            step = self.open_steps.get(key)
            if step is not None and not step[1]:
                # A model call answers with its first tool call or its step's end; an error first is its failure
                # (a tool's failure is a result, not an error part).
                step[1] = True
                self._model_call(agent, "error" if kind == "error" else "ok")
            if kind == "step-finish":
                self.open_steps.pop(key, None)
                if step is not None and not path:
                    self._step(max(at.timestamp() - step[0], 0.0))
        elif kind == "tool-approval-verdict" and not part.get("approved"):
            self.denied.add((run_pk, str(part.get("tool_call_id"))))
        elif kind == "tool-result":
            outcome = "error" if part.get("is_error") else "ok"
            if (run_pk, str(part.get("tool_call_id"))) in self.denied:
                outcome = "denied"  # its verdict came just before it: the tool never ran
            self.counts[(Tally.Kind.TOOL_CALL, str(part.get("tool_name", "")), outcome)] += 1
        elif kind == "finish" and not path:
            # A leg's end: a step it suspended or stopped in has no step-finish; its call, if any, was counted.
            for open_key in [open_key for open_key in self.open_steps if open_key.split("/")[0] == str(run_pk)]:
                if not self.open_steps.pop(open_key)[1]:
                    self._model_call(agent, "interrupted")

    def _model_call(self, agent: str, outcome: str) -> None:
        self.counts[(Tally.Kind.MODEL_CALL, _agent_provider(agent), outcome)] += 1

    def _step(self, seconds: float) -> None:
        for bound in (*STEP_BUCKETS, "+Inf"):
            if bound == "+Inf" or seconds <= bound:
                self.counts[(Tally.Kind.STEP, str(bound), "")] += 1
                self.totals[(Tally.Kind.STEP, str(bound), "")] += seconds

    def save(self) -> None:
        for key, count in self.counts.items():
            kind, label, outcome = key
            tally, _ = Tally.objects.get_or_create(kind=kind, label=label[:200], outcome=outcome)
            Tally.objects.filter(pk=tally.pk).update(count=F("count") + count, total=F("total") + self.totals[key])


def _parts(entries: Iterable[tuple[int, int, str, str, datetime]], fold: _Fold) -> tuple[int, int]:
    """Fold ``entries``; returns how many were read and the last one's id (0 for none)."""
    read = last = 0
    for entry_id, run_pk, agent, text, at in entries:
        read, last = read + 1, entry_id
        try:
            part = part_decode(text)
        except Exception:  # a part sealed with a key no longer configured cannot be read: it is passed over
            continue
        if isinstance(part, dict):
            fold.add(agent, run_pk, part, at)
    return read, last


@transaction.atomic
def tallies_fold(*, run_pks: list[int] | None = None, now: datetime | None = None) -> int:
    """Fold the journal parts not yet folded (at most BATCH) into the tallies; returns how many were read.

    With ``run_pks`` (a prune, about to delete those runs' journals), their parts past the cursor are folded whatever
    their number, and the cursor does not move: the other runs' parts are folded by a later call in order."""
    now = now or timezone.now()
    JournalFold.objects.get_or_create(pk=1)
    state = JournalFold.objects.select_for_update().get(pk=1)  # one fold at a time
    fold = _Fold(dict(state.open_steps))
    rows = JournalEntry.objects.filter(id__gt=state.last_entry_id, is_sentinel=False).order_by("id")
    if run_pks is not None:
        rows = rows.filter(run_id__in=run_pks)
    else:
        # A journal id is taken when its row is inserted, not when it commits: only rows written SETTLE ago are
        # folded, so a transaction still open cannot commit a row behind the cursor.
        rows = rows.filter(created_at__lt=now - SETTLE)[:BATCH]
    columns = rows.values_list("id", "run_id", "run__agent", "part", "created_at")
    read, last = _parts(columns.iterator(chunk_size=2000), fold)
    fold.save()
    stale = (now - timedelta(days=_OPEN_STEP_DAYS)).timestamp()
    state.open_steps = {key: step for key, step in fold.open_steps.items() if step[0] >= stale}
    if run_pks is None and last:
        state.last_entry_id = last
    state.folded_at = now
    state.save()
    return read


def fold_before_prune(*, run_pks: list[int], **_: object) -> None:
    """runs.signals.run_journals_pruning's receiver: count the journals of the runs about to be pruned."""
    tallies_fold(run_pks=run_pks)
