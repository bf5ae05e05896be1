"""Emailing reviewers: the approval requests a reviewer may decide, in one email per request, or one per reviewer
and digest window (DEUZ_REVIEW_EMAIL_DIGEST_SECONDS), through Django's email framework (EMAIL_URL).

An email names the tool, the agent, the run, who started it and when the request expires, with a link straight to
its decide page built from DEUZ_PUBLIC_URL (never from a request's Host header); never the request's token (a
bearer credential for the verdict) nor the tool's input. Each claimed message is checked again when it is sent: a
request closed meanwhile, or a reviewer who may no longer decide it, turned the emails off or has no address, is
sent nothing, and the message is settled as skipped with the reason.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.mail import EmailMessage, mailers
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.roles import approval_is_decidable_by
from approvals.selectors import approval_is_open
from notifications.models import OutboxMessage
from notifications.selectors import outbox_messages_for_email, outbox_recipient_may_read, review_email_wanted_by
from notifications.services import AttemptClaim, outbox_attempt_finish, outbox_claim_emails_of, outbox_message_skip

__all__ = ["ReviewEmail", "public_url", "review_email_build", "review_emails_deliver"]


def public_url(path: str) -> str:
    """``path`` on this server as people reach it (DEUZ_PUBLIC_URL)."""
    base = settings.DEUZ_PUBLIC_URL
    if not base:
        raise LookupError("DEUZ_PUBLIC_URL is not set, so no link can be built (system check notifications.E001).")
    return base.rstrip("/") + path


@dataclass(frozen=True)
class ReviewEmail:
    """An email ready to send, and the claims it settles."""

    message: EmailMessage
    claims: list[AttemptClaim]


def _request_lines(request: ApprovalRequest) -> dict[str, str]:
    run = request.run
    return {
        "tool": request.tool_name,
        "agent": run.agent,
        "sub_agent": " › ".join(request.agent_path),
        "run_id": run.run_id,
        "started_by": run.created_by.get_username() if run.created_by else "an API client without an account",
        "issued_at": f"{request.issued_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC",
        "expires_at": f"{request.expires_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC",
        "link": public_url(reverse("console:detail", args=[run.run_id, request.approval_id])),
    }


def review_email_build(*, recipient: object, requests: list[ApprovalRequest], message_id: str) -> EmailMessage:
    """The email telling ``recipient`` of ``requests`` (one, or a digest's), with a Message-ID made from its first
    message's id, the same on every attempt."""
    items = [_request_lines(request) for request in requests]
    if len(items) == 1:
        subject = f"Approval needed: {items[0]['tool']} in run {items[0]['run_id']}"
    else:
        subject = f"{len(items)} approval requests wait for your verdict"
    body = render_to_string("notifications/review_email.txt", {
        "recipient": recipient, "items": items, "account_url": public_url(reverse("account")),
        "console_url": public_url(reverse("console:queue")),
    })
    host = urlsplit(settings.DEUZ_PUBLIC_URL).hostname or "deuz.invalid"
    return EmailMessage(subject=subject, body=body, from_email=settings.DEFAULT_FROM_EMAIL,
                        to=[recipient.email], headers={"Message-ID": f"<{message_id}@{host}>"})


def _not_sent_because(message: OutboxMessage, now: datetime) -> str:
    """Why ``message`` must not be sent now, or ""."""
    request, recipient = message.approval, message.recipient
    if not approval_is_open(request, now=now):
        return f"Not sent: the request is {request.get_status_display().lower()} or its run was cancelled."
    if not outbox_recipient_may_read(message) or not approval_is_decidable_by(user=recipient, run=request.run):
        return "Not sent: the reviewer may no longer decide this request."
    if not review_email_wanted_by(recipient):
        return "Not sent: the reviewer turned these emails off, or has no address."
    return ""


def _prepare(claims: list[AttemptClaim], now: datetime | None) -> ReviewEmail | None:
    """Skip the claims that must not be sent; the email for the others, or None when none is left."""
    now = now or timezone.now()
    messages = outbox_messages_for_email(message_pks=[claim.message_pk for claim in claims])
    sendable: list[tuple[AttemptClaim, OutboxMessage]] = []
    for claim in claims:
        message = messages.get(claim.message_pk)
        if message is None:  # deleted with its request or its reviewer
            continue
        if reason := _not_sent_because(message, now):
            outbox_message_skip(claim=claim, reason=reason, now=now)
        else:
            sendable.append((claim, message))
    if not sendable:
        return None
    first = sendable[0][1]
    try:
        email = review_email_build(recipient=first.recipient, requests=[m.approval for _, m in sendable],
                                   message_id=first.webhook_id)
    except LookupError as exc:  # no DEUZ_PUBLIC_URL: retried, as a mail server that does not answer
        _finish([claim for claim, _ in sendable], error=f"Not sent: {exc}", duration_ms=0, now=now)
        return None
    return ReviewEmail(message=email, claims=[claim for claim, _ in sendable])


def _finish(claims: list[AttemptClaim], *, error: str, duration_ms: int, now: datetime | None) -> None:
    for claim in claims:
        outbox_attempt_finish(claim=claim, status_code=None, error=error, duration_ms=duration_ms, now=now,
                              delivered=not error)


def _send(message: EmailMessage) -> str:
    """Hand ``message`` to the mail server (or the console, or a file); the error, or ""."""
    try:
        mailers.default.send_messages([message])
    except Exception as exc:  # the mail server refused or could not be reached: retried
        return f"Not sent: {type(exc).__name__}: {exc}"[:2000]
    return ""


async def review_emails_deliver(claims: list[AttemptClaim], *, worker_id: str, now: datetime | None = None) -> None:
    """One attempt at the claimed emails to one reviewer, as one email for all that may still be sent; with a
    digest, every other email to them that is due joins it. The mail server is talked to off the database thread."""
    more: list[AttemptClaim] = []
    if settings.DEUZ_REVIEW_EMAIL_DIGEST_SECONDS:
        more = await sync_to_async(outbox_claim_emails_of)(recipient_pk=claims[0].recipient_pk, worker_id=worker_id,
                                                           now=now, exclude=[claim.message_pk for claim in claims])
    prepared = await sync_to_async(_prepare)([*claims, *more], now)
    if prepared is None:
        return
    started = time.monotonic()
    error = await asyncio.to_thread(_send, prepared.message)
    duration_ms = int((time.monotonic() - started) * 1000)
    await sync_to_async(_finish)(prepared.claims, error=error, duration_ms=duration_ms, now=now)
