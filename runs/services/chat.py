"""Writes for the AI SDK's chat (SERVICE.md, "The AI SDK chat wire"): a chat id is a thread id, and a chat message
is the thread's next turn. The first message of a chat id that names no thread starts the thread, with the agent the
client names, for the user who sends it. Verdicts given from a chat are the approvals app's (approvals.chat).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction

from runs.errors import ThreadAgentMismatch
from runs.models import Run, Thread
from runs.services.threads import thread_message_add, thread_start

__all__ = ["chat_message_send"]


@transaction.atomic
def chat_message_send(
    *, chat_id: str, content: str | list[dict[str, Any]], agent: str | None, user: AbstractBaseUser,
) -> Run:
    """Queue the chat's next turn with the user message ``content``: on thread ``chat_id``, started for ``user`` with
    ``agent`` when there is none. ThreadAgentMismatch when ``agent`` is not the thread's; ThreadTurnActive while a
    turn is not over (runs.services.threads). Who may write to an existing thread is the caller's check."""
    thread = Thread.objects.filter(thread_id=chat_id).first()
    if thread is None:
        if not agent:
            raise ValidationError({"agent": ["A new chat (an id that names no thread yet) needs its agent."]})
        thread = thread_start(agent=agent, user=user, thread_id=chat_id)  # ThreadAlreadyExists if one raced us
    elif agent and agent != thread.agent:
        raise ThreadAgentMismatch(thread.thread_id, thread.agent)
    return thread_message_add(thread_id=thread.thread_id, content=content, user=user)
