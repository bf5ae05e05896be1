"""Writes for conversations: starting a thread, and adding a turn (a run) to it.

A turn starts from the thread's history, the final messages of the previous turn (its tool calls and results
included), plus one new user message; the client never supplies the history. A thread takes a new message only
once its last turn has ended: while one is queued, running, suspended or needs review, ThreadTurnActive names it.
The thread's row is locked while a turn is added, so two concurrent posts make one turn (and the unique
(thread, turn) constraint holds on any database).
"""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from runs.agents import agent_get
from runs.errors import ThreadAlreadyExists, ThreadNotFound, ThreadTurnActive
from runs.models import Run, Thread
from runs.runtime.types import Message
from runs.selectors import thread_history, thread_latest_turn
from runs.services.lifecycle import run_start

__all__ = ["ACTIVE_TURN_STATUSES", "thread_message_add", "thread_start"]

#: A thread whose last turn is in one of these takes no new message (the turn is not over).
ACTIVE_TURN_STATUSES = (Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.SUSPENDED, Run.Status.NEEDS_REVIEW)


@transaction.atomic
def thread_start(
    *, agent: str, user: AbstractBaseUser | None, thread_id: str | None = None, metadata: dict[str, Any] | None = None,
) -> Thread:
    """A new thread with ``agent``, owned by ``user``; ``thread_id`` is minted when not given (ThreadAlreadyExists
    when taken); ``metadata`` is the client's own JSON object, kept as given. It has no turn yet."""
    agent_get(agent)  # raises UnknownAgent
    thread = Thread(
        thread_id=thread_id or f"thread_{timezone.now():%Y%m%d}_{secrets.token_hex(6)}",
        agent=agent,
        created_by=user if user is not None and user.is_authenticated else None,
        metadata=metadata or {},
    )
    thread.full_clean(validate_unique=False)
    try:
        with transaction.atomic():
            thread.save()
    except IntegrityError:
        raise ThreadAlreadyExists(thread.thread_id) from None
    return thread


@transaction.atomic
def thread_message_add(
    *, thread_id: str, content: str | list[dict[str, Any]], user: AbstractBaseUser | None, run_id: str | None = None,
) -> Run:
    """Queue the thread's next turn: a run of its agent on the thread's history plus the user message ``content``
    (a string or a list of parts); ``run_id`` is minted when not given. ThreadTurnActive (with the active run's id)
    while the last turn is not over; ThreadNotFound for an unknown thread."""
    try:
        thread = Thread.objects.select_for_update().get(thread_id=thread_id)
    except Thread.DoesNotExist:
        raise ThreadNotFound(thread_id) from None
    previous = thread_latest_turn(thread=thread)
    if previous is not None and previous.status in ACTIVE_TURN_STATUSES:
        raise ThreadTurnActive(thread.thread_id, previous.run_id, previous.status)
    message: Message = {"role": "user", "content": content}
    run = run_start(
        agent=thread.agent, messages=[*thread_history(thread=thread), message], run_id=run_id, user=user,
        thread=thread, turn=1 if previous is None else previous.turn + 1,
    )
    thread.save(update_fields=["updated_at"])  # its latest activity: lists show it first
    return run
