"""The Redis Pub/Sub layer's use of channels_redis's private API (runs.wire.channel_layers._PromptShardConnection)
holds only for the release it was written against: these fail, saying what to re-read, when another release is
installed or a private name it uses changed. Its behaviour is tested with Redis in tests/deuz_project/test_backends.py."""

from __future__ import annotations

import importlib.metadata
import inspect
import re

import pytest
from channels_redis import pubsub, utils

from runs.wire.channel_layers import CHANNELS_REDIS_VERSION, RedisPubSubChannelLayer, _PromptShardConnection
from tests.environment import REPO_ROOT

RECHECK = (
    f"runs.wire.channel_layers._PromptShardConnection was written against channels-redis {CHANNELS_REDIS_VERSION}. "
    "Re-read the new release's channels_redis/pubsub.py: RedisSingleShardConnection._do_receiving (the receive loop "
    "it replaces: port any change to it), RedisPubSubChannelLayer._get_layer (which loop_layer repeats) and what "
    "RedisPubSubLoopLayer.__init__ sets, and channels_redis/utils.py's _wrap_close; then move "
    "CHANNELS_REDIS_VERSION and requirements.txt's pin together."
)

#: The private callables it calls or overrides, with the signatures it was written against.
SIGNATURES = {
    "RedisSingleShardConnection.__init__": (pubsub.RedisSingleShardConnection.__init__, "(self, host, channel_layer)"),
    "RedisSingleShardConnection._do_receiving": (pubsub.RedisSingleShardConnection._do_receiving, "(self)"),
    "RedisSingleShardConnection._receive_message": (
        pubsub.RedisSingleShardConnection._receive_message, "(self, message)"),
    "RedisSingleShardConnection.subscribe": (pubsub.RedisSingleShardConnection.subscribe, "(self, channel)"),
    "RedisPubSubChannelLayer._get_layer": (pubsub.RedisPubSubChannelLayer._get_layer, "(self)"),
    "RedisPubSubLoopLayer.__init__": (
        pubsub.RedisPubSubLoopLayer.__init__,
        "(self, hosts=None, prefix='asgi', on_disconnect=None, on_reconnect=None, channel_layer=None, **kwargs)",
    ),
    "utils._wrap_close": (utils._wrap_close, "(proxy, loop)"),
}


def test_the_installed_channels_redis_is_the_release_the_override_was_written_against():
    installed = importlib.metadata.version("channels-redis")
    assert installed == CHANNELS_REDIS_VERSION, f"channels-redis {installed} is installed. {RECHECK}"


def test_requirements_pin_the_release_the_override_was_written_against():
    requirements = (REPO_ROOT / "requirements.txt").read_text(encoding="utf-8")
    pinned = re.search(r"^channels-redis==(\S+)", requirements, re.MULTILINE)
    assert pinned is not None and pinned[1] == CHANNELS_REDIS_VERSION, (
        f"requirements.txt pins channels-redis {pinned[1] if pinned else 'nowhere'}. {RECHECK}")


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_a_private_callable_it_relies_on_has_the_signature_it_was_written_against(name):
    function, expected = SIGNATURES[name]
    assert str(inspect.signature(function)) == expected, f"channels_redis changed {name}. {RECHECK}"


def test_the_receive_loop_it_replaces_is_a_coroutine_as_its_own_is():
    assert inspect.iscoroutinefunction(pubsub.RedisSingleShardConnection._do_receiving), RECHECK
    assert inspect.iscoroutinefunction(_PromptShardConnection._do_receiving)


def test_the_private_attributes_it_reads_are_set_by_channels_redis():
    # Building these connects to nothing: a shard connects on its first publish or subscribe.
    proxy = pubsub.RedisPubSubChannelLayer(hosts=["redis://127.0.0.1:1"])
    layer = pubsub.RedisPubSubLoopLayer(*proxy._args, **proxy._kwargs, channel_layer=proxy)
    missing = [f"{owner}.{name}" for owner, value, names in (
        ("RedisPubSubChannelLayer", proxy, ("_layers", "_args", "_kwargs")),
        ("RedisPubSubLoopLayer", layer, ("_shards",)),
        ("RedisSingleShardConnection", layer._shards[0], ("_pubsub", "host")),
    ) for name in names if name not in vars(value)]
    assert missing == [], f"channels_redis no longer sets {missing}. {RECHECK}"
    assert isinstance(proxy._layers, dict), RECHECK
    assert hasattr(pubsub, "logger"), RECHECK


async def test_each_loops_layer_runs_on_prompt_connections_built_once():
    proxy = RedisPubSubChannelLayer(hosts=["redis://127.0.0.1:1", "redis://127.0.0.1:2"])
    layer = proxy._get_layer()
    try:
        assert [(type(shard), shard.host, shard.channel_layer) for shard in layer._shards] == [
            (_PromptShardConnection, {"address": "redis://127.0.0.1:1"}, layer),
            (_PromptShardConnection, {"address": "redis://127.0.0.1:2"}, layer),
        ]
        assert proxy._get_layer() is layer
    finally:
        await proxy.flush()
