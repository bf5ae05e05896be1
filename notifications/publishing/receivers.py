"""From domain changes to outbox events: receivers of the signals runs and approvals send inside the transaction
of each change, so an event commits or rolls back with the change it tells of.

  runs.signals.run_leg_closed, run_cancelled    run.suspended, run.completed, run.failed, run.cancelled,
                                                run.needs_review (as the run's new status says)
  approvals.signals.approval_requested          approval.requested, one event per request, with an email to each
                                                reviewer who may decide it (DEUZ_REVIEW_EMAILS)
  approvals.signals.approval_decided            approval.decided
  runs.signals.effect_needs_review              effect.needs_review

An event is recorded only when a subscription wants it and its owner may read the run, or a reviewer is to be
emailed; recording it cannot undo the change (it runs in a savepoint, and a failure is logged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction

from approvals.models import ApprovalRequest
from approvals.signals import approval_decided, approval_requested
from notifications.models import EventType
from notifications.publishing.payloads import approval_data, effect_data, run_data
from notifications.selectors import review_email_recipients, webhook_subscriptions_for
from notifications.services import outbox_event_record
from runs.models import Effect, Run
from runs.signals import effect_needs_review, run_cancelled, run_leg_closed

__all__ = ["RUN_EVENTS", "publishing_connect"]

logger = logging.getLogger("deuz.notifications")

#: The run statuses subscribers are told of, with their event type.
RUN_EVENTS = {
    Run.Status.SUSPENDED: EventType.RUN_SUSPENDED,
    Run.Status.COMPLETED: EventType.RUN_COMPLETED,
    Run.Status.FAILED: EventType.RUN_FAILED,
    Run.Status.CANCELLED: EventType.RUN_CANCELLED,
    Run.Status.NEEDS_REVIEW: EventType.RUN_NEEDS_REVIEW,
}


def _publish(event_type: str, run: Run, data: Callable[[], Any], *, approval: ApprovalRequest | None = None) -> None:
    subscriptions = webhook_subscriptions_for(event_type=event_type, run=run)
    try:
        with transaction.atomic():  # a savepoint: a failure here cannot spoil the change's transaction
            reviewers = review_email_recipients(request=approval) if approval and settings.DEUZ_REVIEW_EMAILS else []
            if subscriptions or reviewers:
                outbox_event_record(event_type=event_type, run=run, data=data, subscriptions=subscriptions,
                                    reviewers=reviewers, approval=approval)
    except Exception:  # the change goes on; its event is lost, and said so
        logger.exception("Recording the %s event of run %s failed; it will not be delivered.", event_type, run.run_id)


def run_status_publish(*, run: Run, **kwargs: object) -> None:
    """A leg closed, or a run was cancelled: its new status, if subscribers are told of it."""
    event_type = RUN_EVENTS.get(run.status)
    if event_type is not None:
        _publish(event_type, run, lambda: run_data(run))


def approvals_requested_publish(*, requests: list[ApprovalRequest], **kwargs: object) -> None:
    for request in requests:
        _publish(EventType.APPROVAL_REQUESTED, request.run, lambda request=request: approval_data(request),
                 approval=request)


def approval_decided_publish(*, request: ApprovalRequest, **kwargs: object) -> None:
    _publish(EventType.APPROVAL_DECIDED, request.run, lambda: approval_data(request))


def effect_needs_review_publish(*, effect: Effect, **kwargs: object) -> None:
    _publish(EventType.EFFECT_NEEDS_REVIEW, effect.run, lambda: effect_data(effect))


def publishing_connect() -> None:
    """Connect the receivers (NotificationsConfig.ready)."""
    run_leg_closed.connect(run_status_publish, dispatch_uid="notifications.run_leg_closed")
    run_cancelled.connect(run_status_publish, dispatch_uid="notifications.run_cancelled")
    approval_requested.connect(approvals_requested_publish, dispatch_uid="notifications.approval_requested")
    approval_decided.connect(approval_decided_publish, dispatch_uid="notifications.approval_decided")
    effect_needs_review.connect(effect_needs_review_publish, dispatch_uid="notifications.effect_needs_review")
