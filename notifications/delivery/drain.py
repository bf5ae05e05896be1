"""Delivering the outbox: a pass claims the messages that are due and makes one attempt at each; the workers run
passes in their loop (``outbox_deliver_forever``, woken at once by this process's new messages and else every
second), and `manage.py notifications deliver` runs one.

Each attempt first checks that the message's recipient may still read the run (runs.access): a subscriber who
lost the right is sent nothing. Emails to reviewers (notifications.delivery.mail) go out one email per reviewer
for every message to them that is due. A process killed between an event's commit and its delivery loses nothing: the
message is in the outbox and the next pass, of any worker, takes it; killed during an attempt, the attempt's lease
lapses and another worker makes the next one (at least once; the receiver tells a repeat by its webhook-id).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from datetime import datetime

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone

from notifications.delivery.mail import review_emails_deliver
from notifications.delivery.transport import Answer, WebhookSender
from notifications.models import OutboxMessage
from notifications.selectors import outbox_due_ids, outbox_message_for_delivery, outbox_recipient_may_read
from notifications.services import (
    AttemptClaim,
    outbox_attempt_finish,
    outbox_claim,
    outbox_message_skip,
)
from notifications.standard_webhooks import webhook_body, webhook_headers
from runs.errors import SealedDataError
from runs.runtime.faults import FaultPoint

__all__ = ["OUTBOX_BATCH", "OUTBOX_POLL_SECONDS", "outbox_deliver", "outbox_deliver_forever", "outbox_wake_local"]

logger = logging.getLogger("deuz.notifications")

#: The most messages one pass claims, and how many of them are sent at once.
OUTBOX_BATCH = 20
_CONCURRENT_SENDS = 8
#: How often an idle worker looks for due messages that no commit of its own process announced.
OUTBOX_POLL_SECONDS = 1.0

_NOT_READABLE = "Not sent: the subscriber may no longer read this run."


@sync_to_async
def _due(now: datetime | None, limit: int) -> list[int]:
    return outbox_due_ids(now=now or timezone.now(), limit=limit)


@sync_to_async
def _order(claim: AttemptClaim) -> tuple[str, bytes, dict[str, str]] | str | None:
    """What the attempt sends (URL, body, signed headers), a reason to send nothing ever, or None when the message
    is gone (its subscription was deleted)."""
    message = outbox_message_for_delivery(message_pk=claim.message_pk)
    if message is None:
        return None
    if not outbox_recipient_may_read(message):
        return _NOT_READABLE
    event, subscription = message.event, message.subscription
    body = webhook_body(event_type=event.type, occurred_at=event.occurred_at, data=event.data)
    headers = webhook_headers(secret=subscription.secret, message_id=message.webhook_id, body=body,
                              signed_at=timezone.now())
    return subscription.url, body, headers


async def _attempt(claim: AttemptClaim, sender: WebhookSender, now: datetime | None, limiter: asyncio.Semaphore) -> None:
    async with limiter:
        try:
            order = await _order(claim)
        except SealedDataError as exc:  # its keys are not set: the attempt fails, and is retried once they are
            order = Answer(status_code=None, error=f"Not sent: {exc}", duration_ms=0)
        if order is None:
            return
        if isinstance(order, str):
            await sync_to_async(outbox_message_skip)(claim=claim, reason=order, now=now)
            return
        if isinstance(order, Answer):
            answer = order
        else:
            url, body, headers = order
            answer = await sender.post(url, body=body, headers=headers)
        await sync_to_async(outbox_attempt_finish)(claim=claim, status_code=answer.status_code, error=answer.error,
                                                   duration_ms=answer.duration_ms, now=now)


async def _emails(claims: list[AttemptClaim], worker_id: str, now: datetime | None,
                  limiter: asyncio.Semaphore) -> None:
    async with limiter:
        await review_emails_deliver(claims, worker_id=worker_id, now=now)


async def outbox_deliver(*, worker_id: str, sender: WebhookSender | None = None, now: datetime | None = None,
                         limit: int = OUTBOX_BATCH, fault: Callable[[str], None] | None = None) -> int:
    """One pass: claim up to ``limit`` messages due at ``now`` (the clock: the present when None) and make one
    attempt at each through ``sender`` (a new one, closed after, when None). Returns how many were claimed."""
    due = await _due(now, limit)
    if not due:
        return 0
    if fault is not None:
        fault(FaultPoint.BEFORE_OUTBOX_DELIVERY)
    claims = await sync_to_async(outbox_claim)(message_pks=due, worker_id=worker_id, now=now)
    if not claims:
        return 0
    webhooks = [claim for claim in claims if claim.channel != OutboxMessage.Channel.EMAIL]
    # One email per message; with a digest, one per reviewer for all their messages that are due.
    digest = bool(settings.DEUZ_REVIEW_EMAIL_DIGEST_SECONDS)
    emails: dict[object, list[AttemptClaim]] = {}
    for claim in claims:
        if claim.channel == OutboxMessage.Channel.EMAIL:
            emails.setdefault(claim.recipient_pk if digest else claim.message_pk, []).append(claim)
    own = sender is None and bool(webhooks)
    sender = sender or (WebhookSender() if webhooks else None)
    limiter = asyncio.Semaphore(_CONCURRENT_SENDS)
    try:
        results = await asyncio.gather(
            *(_attempt(claim, sender, now, limiter) for claim in webhooks),
            *(_emails(group, worker_id, now, limiter) for group in emails.values()),
            return_exceptions=True,
        )
    finally:
        if own:
            await sender.aclose()
    for result in results:
        if isinstance(result, Exception):  # its lease lapses and a later pass makes the next attempt
            logger.warning("An outbox attempt of worker %s failed (%s).", worker_id, type(result).__name__)
    return len(claims)


# The wake events of the deliverers running in this process, each with the event loop it belongs to.
_local_wakes: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
_local_lock = threading.Lock()


def outbox_wake_local(**kwargs: object) -> None:
    """Wake this process's deliverers (a receiver of notifications.signals.outbox_messages_queued)."""
    with _local_lock:
        local = list(_local_wakes)
    for loop, wake in local:
        try:
            loop.call_soon_threadsafe(wake.set)
        except RuntimeError:  # that loop closed: a worker stopping
            pass


async def outbox_deliver_forever(*, worker_id: str, stopping: asyncio.Event,
                                 fault: Callable[[str], None] | None = None,
                                 poll_seconds: float = OUTBOX_POLL_SECONDS) -> None:
    """Run passes until ``stopping`` is set: at once after this process queued messages, else every
    ``poll_seconds``, and again at once after a full batch."""
    wake = asyncio.Event()
    entry = (asyncio.get_running_loop(), wake)
    with _local_lock:
        _local_wakes.add(entry)
    try:
        async with WebhookSender() as sender:
            while not stopping.is_set():
                wake.clear()
                try:
                    if await outbox_deliver(worker_id=worker_id, sender=sender, fault=fault) >= OUTBOX_BATCH:
                        continue
                except Exception as exc:  # a database blip must not end the deliveries: the next poll tries again
                    logger.warning("Delivering the outbox failed (%s); retrying.", type(exc).__name__)
                waiters = [asyncio.ensure_future(stopping.wait()), asyncio.ensure_future(wake.wait())]
                try:
                    await asyncio.wait(waiters, timeout=poll_seconds, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiter in waiters:
                        waiter.cancel()
    finally:
        with _local_lock:
            _local_wakes.discard(entry)
