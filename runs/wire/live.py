"""Live pages: the notices sent to open pages when a run's status or its approval requests change (receivers of
runs.signals.run_status_changed and approvals.signals.approval_requests_changed, connected by RunsConfig); and
the wake-up of a run's stream followers when a service, not a leg, ended its journal (runs.signals.run_journal_ended).
Frames name what changed, never its data: a page fetches itself again, through its view's own permission checks.

  live.runs          the run list of every signed-in user (each consumer drops runs its user may not read)
  live.run.<digest>  one run's timeline, live transcript and console pages
  live.approvals     the reviewers' queue and request pages
  live.thread.<digest>  one thread's chat pages: a turn's status changed, or a new turn started
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from runs.models import Run
from runs.wire.groups import APPROVALS_GROUP, RUNS_GROUP, run_pages_group, run_stream_group, thread_pages_group

__all__ = ["approvals_notify", "live_send", "run_status_notify", "run_stream_wake"]

logger = logging.getLogger("deuz.live")

# Sends started on a running loop, kept referenced until they finish (a bare task may be collected midway).
_sending: set[asyncio.Task[None]] = set()


def live_send(groups: list[str], message: dict[str, Any]) -> None:
    """Send ``message`` to each group; a broken or missing layer costs the live update only, never the write
    that caused it (pages still show the truth on their next load)."""
    _group_send(groups, {"type": "live.changed", **message})


def run_stream_wake(*, run_id: str, seq: int, **kwargs: Any) -> None:
    """Wake the followers of ``run_id``'s stream as a leg's end does (runs.wire.writer.JournalWriter.notify): its
    journal ended at ``seq`` (connected to runs.signals.run_journal_ended, sent by a cancel no leg streamed)."""
    _group_send([run_stream_group(run_id)], {"type": "journal.appended", "seq": seq, "end": True})


def _group_send(groups: list[str], message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return

    async def send_all() -> None:
        try:
            for group in groups:
                await layer.group_send(group, message)
        except Exception as exc:
            logger.warning("Live update to %s not sent: %s", ", ".join(groups), type(exc).__name__)

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    try:
        if loop is not None:  # called from async code (a consumer's test, an async view): do not block its loop
            task = loop.create_task(send_all())
            _sending.add(task)
            task.add_done_callback(_sending.discard)
        else:
            async_to_sync(send_all)()
    except Exception as exc:  # no loop could run the send (a shut-down process)
        logger.warning("Live update to %s not sent: %s", ", ".join(groups), type(exc).__name__)


def run_status_notify(*, run_pk: int, **kwargs: Any) -> None:
    """Tell the run list and the run's pages its status changed (connected to runs.signals.run_status_changed)."""
    row = Run.objects.filter(pk=run_pk).values("run_id", "status", "created_by_id", "thread__thread_id").first()
    if row is None:
        return
    groups = [RUNS_GROUP, run_pages_group(row["run_id"])]
    if row["thread__thread_id"]:
        groups.append(thread_pages_group(row["thread__thread_id"]))
    live_send(groups, {
        "event": "status", "run_id": row["run_id"], "status": row["status"], "created_by_id": row["created_by_id"],
        "thread_id": row["thread__thread_id"],
    })


def approvals_notify(*, run_pk: int, **kwargs: Any) -> None:
    """Tell the console and the run's pages that the run's approval requests changed (connected to
    approvals.signals.approval_requests_changed)."""
    row = Run.objects.filter(pk=run_pk).values("run_id", "status").first()
    if row is not None:
        live_send([APPROVALS_GROUP, run_pages_group(row["run_id"])],
                  {"event": "approvals", "run_id": row["run_id"], "status": row["status"]})
