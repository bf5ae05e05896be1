"""Fixtures of the webhook tests: a receiver on the loopback, subscriptions to it, one outbox pass at a time (on
the test's clock when it passes one), and runs of the demo agents driven to each event."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from notifications.delivery.drain import outbox_deliver
from notifications.delivery.transport import WebhookSender
from notifications.models import EventType
from notifications.services import webhook_subscription_create
from tests.notifications.receiver import WebhookReceiver

ALL_EVENTS = list(EventType.values)


@pytest.fixture
def receiver():
    """A receiver that answers every delivery 204 (give it ``answers`` to say otherwise)."""
    started = []

    def make(*answers, **options) -> WebhookReceiver:
        started.append(WebhookReceiver(*answers, **options))
        return started[-1]

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def hooks(receiver):
    """The default receiver, answering 204."""
    return receiver()


@pytest.fixture
def subscribe(hooks):
    """Subscribe ``user`` to ``events`` (all of them by default) at ``url`` (the default receiver's)."""

    def make(user, *, events=None, url=None):
        return webhook_subscription_create(owner=user, url=url or hooks.url, events=events or ALL_EVENTS)

    return make


@pytest.fixture
def deliver():
    """One outbox pass, as a worker makes it, at ``now`` (the present by default); returns how many attempts."""

    def once(*, now=None, **sender_options) -> int:
        async def deliver_once() -> int:
            async with WebhookSender(**sender_options) as sender:
                return await outbox_deliver(worker_id="test-deliverer", sender=sender, now=now)

        return async_to_sync(deliver_once)()

    return once
