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

from tests.factories import make_user

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
    make_user("round-trip")
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


@pytest.mark.skipif(not REDIS_URL, reason="Redis's Pub/Sub receiver; REDIS_URL is unset")
async def test_an_idle_redis_receiver_is_woken_by_the_next_subscription(monkeypatch):
    # A web process whose last follower left has no subscription; its next follower's first notification must
    # come as it is published, not when the idle receiver next looks (made a minute here, so only the wake-up
    # can deliver it within the test's wait).
    from runs.wire.channel_layers import RedisPubSubChannelLayer, _PromptShardConnection

    monkeypatch.setattr(_PromptShardConnection, "idle_seconds", 60.0)
    listening, sending = RedisPubSubChannelLayer(hosts=[REDIS_URL]), RedisPubSubChannelLayer(hosts=[REDIS_URL])
    group = f"test-{uuid.uuid4().hex}"
    try:
        gone = await listening.new_channel()
        receiving = asyncio.create_task(listening.receive(gone))
        await asyncio.sleep(0)
        receiving.cancel()  # a consumer that leaves: its channel is unsubscribed
        with pytest.raises(asyncio.CancelledError):
            await receiving
        (shard,) = listening._get_layer()._shards
        async with asyncio.timeout(10):
            while shard._pubsub.subscribed:  # until the receiver has read the unsubscription: idle now
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)

        channel = await listening.new_channel()
        await listening.group_add(group, channel)
        await sending.group_send(group, {"type": "journal.appended", "seq": 3})
        message = await asyncio.wait_for(listening.receive(channel), timeout=10)
    finally:
        await listening.flush()
        await sending.flush()
    assert message == {"type": "journal.appended", "seq": 3}


postgresql_only = pytest.mark.skipif(not DATABASE_URL.startswith(("postgres", "pgsql")), reason="DATABASE_URL is not PostgreSQL")


@postgresql_only
@pytest.mark.django_db
def test_a_new_postgresql_session_starts_in_the_zone_django_uses_so_it_sets_none():
    # Django sets the session's TimeZone on every new connection whose server reports another spelling of it
    # ('Etc/UTC' here): a round trip before the connection's first query, unless the session starts in UTC.
    import psycopg

    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    with psycopg.connect(**params) as raw:
        assert raw.info.parameter_status("TimeZone") == connection.timezone_name == "UTC"


def printed_after_the_first_query(run_python, expression: str) -> str:
    """What a fresh process on this database prints of ``expression`` once its first connection is open."""
    result = run_python(
        "import threading, django; django.setup()\n"
        "from django.db import connection\n"
        "connection.ensure_connection()\n"
        f"print({expression})\n",
        DATABASE_URL=DATABASE_URL,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()[-1]


@postgresql_only
def test_a_processs_first_query_opens_one_pooled_connection(run_python):
    # With the pool's minimum above zero, the first borrow finds the pool still opening its minimum and asks for
    # one more: two backends started at once, on the path of a fresh worker's first resume.
    assert printed_after_the_first_query(run_python, "connection.pool.get_stats()['pool_size']") == "1"


@postgresql_only
def test_a_processs_pool_keeps_one_maintenance_thread(run_python):
    threads = "sum('-worker-' in thread.name for thread in threading.enumerate())"
    assert printed_after_the_first_query(run_python, threads) == "1"
