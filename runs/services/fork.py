"""Writes for forks: a new run started from a checkpoint of another run (time travel, trying again from a point).

A fork is a new run of the same agent whose history is that checkpoint's; it is queued and runs through the
normal worker like any run. What the origin did stays the origin's:

- a tool call the history holds with its result is never executed again (the new run starts after it);
- a call the checkpoint left unanswered (a request waiting for a reviewer, a step cut short) is settled as an
  ``is_error`` result, as a conversation's turn after a failed one is (runs.selectors), so no approval of the
  origin is copied and no token of the origin carries over;
- a call the fork's model makes is its own: the effect ledger keys it by the fork's run id (or by its business
  operation, which the origin may have performed already: the ledger then replays the origin's receipt, naming
  that run, and nothing is done twice).

A fork's approvals are decided by reviewers whatever its agent says (approvals.roles).
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from runs.errors import RunNotFound
from runs.models import Run
from runs.selectors import messages_with_open_calls_settled, run_checkpoint_at
from runs.services.lifecycle import run_start

__all__ = ["FORK_SUFFIX", "run_fork"]

#: A minted fork id is the origin's id, this, and the fork's number: ``run_20270101_ab12-fork-2``.
FORK_SUFFIX = "-fork-"
_RUN_ID_MAX = 200


@transaction.atomic
def run_fork(
    *, run_id: str, step_index: int, user: AbstractBaseUser | None, new_run_id: str | None = None,
) -> Run:
    """Queue a new run of ``run_id``'s agent from its checkpoint of step ``step_index`` (its latest one of that
    step), created by ``user``; its id is ``new_run_id``, or minted from the origin's (``<origin>-fork-<n>``).
    RunNotFound for an unknown run, CheckpointNotFound for a step it has no checkpoint of, RunAlreadyExists for a
    taken ``new_run_id``."""
    try:
        # Locked, so two forks at once number themselves one after the other.
        origin = Run.objects.select_for_update().get(run_id=run_id)
    except Run.DoesNotExist:
        raise RunNotFound(run_id) from None
    checkpoint = run_checkpoint_at(run=origin, step_index=step_index)
    messages = messages_with_open_calls_settled(
        checkpoint["messages"],
        output=f"No result: this run was forked from run {origin.run_id} at step {step_index}, before this call "
        "was answered; it was not carried out here.",
    )
    return run_start(
        agent=origin.agent, messages=messages, run_id=new_run_id or _fork_id(origin), user=user,
        forked_from=origin, forked_from_step=step_index,
    )


def _fork_id(origin: Run) -> str:
    """The next free ``<origin>-fork-<n>`` (the origin's id shortened to fit the 200 characters of a run id)."""
    number = origin.forks.count() + 1
    while True:
        tail = f"{FORK_SUFFIX}{number}"
        candidate = f"{origin.run_id[:_RUN_ID_MAX - len(tail)]}{tail}"
        if not Run.objects.filter(run_id=candidate).exists():
            return candidate
        number += 1
