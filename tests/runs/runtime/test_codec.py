"""The checkpoint codec: JSON text that round-trips bytes, and user dicts that look like its own markers."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runs.runtime.durable import CheckpointCorruptError, deserialize_checkpoint, serialize_checkpoint


def checkpoint(*, messages: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "run_id": "run-1",
        "step_id": "run-1#0",
        "step_index": 0,
        "status": "suspended",
        "messages": messages if messages is not None else [{"role": "user", "content": "hi"}],
        "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
        "created_at": 1_700_000_000_000,
        **extra,
    }


def user_image(data: bytes, *, part_type: str = "image") -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "text", "text": "look"}, {"type": part_type, "data": data, "media_type": "image/png"}],
    }


def tool_call(tool_input: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_call", "tool_call_id": "call_1", "tool_name": "echo", "input": tool_input}],
    }


def round_trip(value: dict[str, Any]) -> dict[str, Any]:
    return deserialize_checkpoint(serialize_checkpoint(value))


def assert_identical(actual: Any, expected: Any) -> None:
    """Equal and of the same types all the way down (``True == 1`` and ``b"" == bytearray()`` would hide a decay)."""
    assert type(actual) is type(expected), (actual, expected)
    if isinstance(expected, dict):
        assert list(actual) == list(expected)
        for key in expected:
            assert_identical(actual[key], expected[key])
    elif isinstance(expected, list):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_identical(a, e)
    elif isinstance(expected, float):
        assert actual == expected and math.copysign(1, actual) == math.copysign(1, expected)
    else:
        assert actual == expected


# Output


def test_serialize_returns_json_text():
    text = serialize_checkpoint(checkpoint())
    assert isinstance(text, str)
    assert json.loads(text)["run_id"] == "run-1"


def test_serialize_keeps_non_ascii_text_readable():
    text = serialize_checkpoint(checkpoint(messages=[{"role": "user", "content": "héllo ✓"}]))
    assert "héllo ✓" in text


# Bytes


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\x89PNG\r\n\x1a\n", bytes(range(256)), bytes(range(255, -1, -1)) * 3],
    ids=["empty", "nul", "png-magic", "all-256-values", "all-values-reversed-x3"],
)
def test_bytes_in_an_image_part_round_trip_exactly(data):
    back = round_trip(checkpoint(messages=[user_image(data)]))
    restored = back["messages"][0]["content"][1]["data"]
    assert type(restored) is bytes
    assert restored == data


def test_bytes_in_a_file_part_round_trip_exactly():
    data = bytes(range(256))
    back = round_trip(checkpoint(messages=[user_image(data, part_type="file")]))
    assert_identical(back["messages"][0]["content"][1]["data"], data)


def test_bytes_are_not_stored_as_a_list_of_numbers():
    text = serialize_checkpoint(checkpoint(messages=[user_image(bytes(range(256)))]))
    assert "[0,1,2,3" not in text
    assert len(text) < 1000


def test_a_whole_checkpoint_with_bytes_round_trips():
    original = checkpoint(messages=[user_image(bytes(range(256))), tool_call({"path": "/tmp/x"})])
    assert_identical(round_trip(original), original)


def test_deserialize_accepts_the_text_as_utf8_bytes():
    original = checkpoint(messages=[user_image(b"\x00\xff")])
    assert_identical(deserialize_checkpoint(serialize_checkpoint(original).encode("utf-8")), original)


# User dicts that look like the codec's markers


@pytest.mark.parametrize(
    "tool_input",
    [
        {"$bytes": "aGk="},
        {"$bytes": "not base64!"},
        {"$bytes": 5},
        {"$bytes": None},
        {"$dict": {"a": 1}},
        {"$dict": "x"},
        {"$dict": {"$bytes": "aGk="}},
        {"$bytes": {"$dict": {}}},
        {"$bytes": "aGk=", "$dict": {}},
        {"$bytes": "aGk=", "other": 1},
        {"$dict": {"$dict": {"$dict": {}}}},
        {"$bytes": b"hi"},
        {"nested": [{"$bytes": "aGk="}, {"$dict": {"$bytes": b"\x00"}}]},
        {"$bytesish": "aGk=", "$": 1, "bytes": "aGk="},
    ],
)
def test_a_user_dict_with_marker_keys_round_trips_as_that_dict(tool_input):
    back = round_trip(checkpoint(messages=[tool_call(tool_input)]))
    assert_identical(back["messages"][0]["content"][0]["input"], tool_input)


def test_a_tool_input_shaped_like_encoded_bytes_does_not_come_back_as_bytes():
    back = round_trip(checkpoint(messages=[tool_call({"$bytes": "aGk="})]))
    assert back["messages"][0]["content"][0]["input"] == {"$bytes": "aGk="}
    assert back["messages"][0]["content"][0]["input"] != b"hi"


def test_marker_like_keys_at_the_top_level_of_a_checkpoint_round_trip():
    original = checkpoint(**{"$bytes": "aGk=", "$dict": {"$bytes": "aGk="}})
    assert_identical(round_trip(original), original)


# Plain JSON values


@pytest.mark.parametrize(
    "value",
    [
        "héllo ✓ — 日本語 😀 \u0000 \n\t\"quoted\" \\",
        [[1, [2, [3, []]]], [], [[]]],
        None,
        True,
        False,
        0,
        -1,
        2**70,
        -(2**70),
        0.1,
        -0.0,
        1e308,
        5e-324,
        1.0,
        {"": "", "a": {"b": {"c": [None, True, 1, 1.5, "x"]}}},
    ],
)
def test_json_values_round_trip_with_their_types(value):
    back = round_trip(checkpoint(messages=[tool_call({"value": value})], extra=value))
    assert_identical(back["messages"][0]["content"][0]["input"]["value"], value)
    assert_identical(back["extra"], value)


def test_tuples_come_back_as_lists():
    back = round_trip(checkpoint(extra=(1, "a", (2,))))
    assert_identical(back["extra"], [1, "a", [2]])


def test_a_dict_subclass_round_trips_as_its_dict_marker_keys_and_bytes_included():
    import collections

    value = collections.OrderedDict([("$bytes", "not bytes"), ("data", b"\x00\x01")])
    back = round_trip(checkpoint(extra=value))
    assert_identical(back["extra"], {"$bytes": "not bytes", "data": b"\x00\x01"})


# Errors


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "{",
        '{"version": 1, "run_id": "r", "messages": [}',
        "[]",
        "null",
        '"a checkpoint"',
        '{"version": 1, "messages": []}',
        '{"version": 1, "run_id": "r"}',
        '{"version": 1, "run_id": "r", "messages": [{"$bytes": "***"}]}',
        b"\xff\xfe\x00",
    ],
)
def test_corrupt_text_raises_checkpoint_corrupt_error(text):
    with pytest.raises(CheckpointCorruptError):
        deserialize_checkpoint(text)


def test_truncated_serialized_checkpoint_raises_checkpoint_corrupt_error():
    text = serialize_checkpoint(checkpoint(messages=[user_image(bytes(range(256)))]))
    with pytest.raises(CheckpointCorruptError):
        deserialize_checkpoint(text[: len(text) // 2])


@pytest.mark.parametrize("version", [2, 99, 0, "1"])
def test_unsupported_version_raises_checkpoint_corrupt_error_naming_it(version):
    text = serialize_checkpoint(checkpoint(version=version))
    with pytest.raises(CheckpointCorruptError, match=rf"version {version!r}"):
        deserialize_checkpoint(text)


def test_missing_version_raises_checkpoint_corrupt_error():
    original = checkpoint()
    del original["version"]
    with pytest.raises(CheckpointCorruptError, match="version"):
        deserialize_checkpoint(serialize_checkpoint(original))


@pytest.mark.parametrize(
    "value",
    [{1, 2}, frozenset({"a"}), object(), 1 + 2j, ...],
    ids=["set", "frozenset", "object", "complex", "ellipsis"],
)
def test_non_json_values_raise_type_error_when_serialized(value):
    with pytest.raises(TypeError):
        serialize_checkpoint(checkpoint(messages=[tool_call({"deep": [{"value": value}]})]))


def test_a_non_string_dict_key_raises_type_error_when_serialized():
    with pytest.raises(TypeError, match="keys must be strings"):
        serialize_checkpoint(checkpoint(extra={1: "one"}))


# Property: any JSON-compatible value plus bytes survives

_KEYS = st.one_of(st.text(max_size=8), st.sampled_from(["$bytes", "$dict", "$", "bytes", "dict"]))
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
    st.binary(),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(_KEYS, children, max_size=5),
        # Dicts that look like encoded values, built from the markers on purpose.
        st.builds(lambda v: {"$bytes": v}, children),
        st.builds(lambda v: {"$dict": v}, children),
    ),
    max_leaves=25,
)


@given(_VALUES)
def test_any_json_value_with_bytes_round_trips_inside_a_checkpoint(value):
    original = checkpoint(messages=[user_image(b"\x00\x01"), tool_call({"value": value})], extra=value)
    assert_identical(round_trip(original), original)
