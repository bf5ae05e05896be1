"""The configured back ends are the ones in use, and they really work.

With DATABASE_URL / REDIS_URL set (CI's second pass) these talk to PostgreSQL and
Redis and fail when either cannot be reached; unset, they check the embedded defaults.
"""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.db import connection

DATABASE_URL = os.environ.get("DATABASE_URL", "")
REDIS_URL = os.environ.get("REDIS_URL", "")


def expected_vendor() -> str:
    if not DATABASE_URL:
        return "sqlite"
    scheme = DATABASE_URL.split(":", 1)[0]
    return "postgresql" if scheme in {"postgres", "postgresql", "pgsql"} else scheme


@pytest.mark.django_db
def test_database_is_the_configured_one():
    assert connection.vendor == expected_vendor()


@pytest.mark.django_db
def test_database_round_trips_a_row():
    get_user_model().objects.create_user(username="round-trip")
    assert get_user_model().objects.filter(username="round-trip").count() == 1


@pytest.mark.django_db
def test_database_answers_a_vendor_specific_query():
    if connection.vendor == "postgresql":
        query, prefix = "SELECT version()", "PostgreSQL"
    else:
        query, prefix = "SELECT 'SQLite ' || sqlite_version()", "SQLite 3."
    with connection.cursor() as cursor:
        cursor.execute(query)
        (version,) = cursor.fetchone()
    assert version.startswith(prefix)


def test_channel_layer_is_the_configured_one():
    layer = get_channel_layer()
    expected = "RedisPubSubChannelLayer" if REDIS_URL else "LoopSafeInMemoryChannelLayer"
    assert type(layer).__name__ == expected


async def test_channel_layer_delivers_a_group_message():
    layer = get_channel_layer()
    group = f"test-{uuid.uuid4().hex}"
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    try:
        await layer.group_send(group, {"type": "run.part", "seq": 7})
        message = await asyncio.wait_for(layer.receive(channel), timeout=10)
    finally:
        await layer.group_discard(group, channel)
        if hasattr(layer, "close_pools"):
            await layer.close_pools()  # Redis pools are bound to this test's event loop
    assert message == {"type": "run.part", "seq": 7}
