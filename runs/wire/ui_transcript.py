"""A thread as the ``UIMessage[]`` a front end starts ``useChat`` with (``GET /api/chat/{id}/messages``): per turn,
its user message, then its assistant message built from the turn's journal by the one mapping
(runs.wire.ui_messages), so a reload shows exactly what the stream showed."""

from __future__ import annotations

from collections.abc import Iterator

from approvals.roles import run_approvals_decided_by
from runs.models import Run, Thread
from runs.runtime.types import StreamPart
from runs.selectors import run_input_messages, thread_turn_list
from runs.stores import get_store
from runs.wire.ui_messages import UIMessage, ui_assistant_message, ui_user_message

__all__ = ["thread_ui_messages"]

_PAGE = 500
#: A turn the chat's stream endpoint answers with: its answer comes from the stream, not from the messages.
ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING)


def thread_ui_messages(*, thread: Thread) -> list[UIMessage]:
    """Every turn of ``thread``, first first: the user message it was sent (id ``<run id>:user``) and its answer (id
    the run's id, as its stream's ``start`` says), but for an active turn (queued or running), whose answer
    ``useChat({resume: true})`` rebuilds from GET /api/chat/{id}/stream's replay: the AI SDK's resume appends the
    replay to a last assistant message, as a server that saves a message when it ends would have none."""
    messages: list[UIMessage] = []
    for run in thread_turn_list(thread=thread):
        sent = run_input_messages(run)[-1]
        messages.append(ui_user_message(sent["content"], message_id=f"{run.run_id}:user"))
        if run.status in ACTIVE:  # GET /api/chat/{id}/stream replays it whole: useChat's resume appends to a last
            continue              # assistant message, so its answer so far here would be shown twice
        messages.append(ui_assistant_message(_journal(run), message_id=run.run_id,
                                             approvals_decided_by=run_approvals_decided_by(run)))
    return messages


def _journal(run: Run) -> Iterator[tuple[int, StreamPart]]:
    store, after = get_store("streams"), -1
    while True:
        page = store.read(run.run_id, after=after, limit=_PAGE)
        yield from page.parts
        if not page.parts or not page.has_more:
            return
        after = page.parts[-1][0]
