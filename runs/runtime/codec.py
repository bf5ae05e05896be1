"""The checkpoint codec: JSON text that round-trips ``bytes`` exactly.

``bytes`` become ``{"$bytes": "<base64>"}``. A user dict that has one of the codec's marker keys is
wrapped as ``{"$dict": {...}}`` so it can never be mistaken for an encoded value.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from .exceptions import CheckpointCorruptError
from .types import AgentCheckpoint

__all__ = ["CHECKPOINT_VERSION", "decode_value", "deserialize_checkpoint", "encode_value", "serialize_checkpoint"]

CHECKPOINT_VERSION = 1
_BYTES = "$bytes"
_DICT = "$dict"
_MARKERS = frozenset({_BYTES, _DICT})


#: Values encoded as themselves, by exact type (a step's messages are mostly these: the fast path).
_SCALARS = frozenset({str, int, float, bool, type(None)})


def encode_value(value: Any) -> Any:
    """``value`` as plain JSON-compatible data, with bytes and marker-like dicts escaped."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        encoded = {}
        for key, item in value.items():
            if type(key) is not str and not isinstance(key, str):
                raise TypeError(f"Checkpoint dict keys must be strings, got {type(key).__name__}.")
            encoded[key] = item if type(item) in _SCALARS else encode_value(item)
        return encoded if _MARKERS.isdisjoint(value) else {_DICT: encoded}
    if kind is list:
        return [item if type(item) in _SCALARS else encode_value(item) for item in value]
    return _encode_other(value)


def _encode_other(value: Any) -> Any:
    """encode_value for what is not exactly a scalar, dict or list: bytes, tuples and subclasses."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {_BYTES: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        return encode_value(dict(value))
    if isinstance(value, (list, tuple)):
        return [encode_value(item) for item in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    raise TypeError(f"{type(value).__name__} is not JSON-compatible and cannot be checkpointed.")


def decode_value(value: Any) -> Any:
    """The inverse of :func:`encode_value`."""
    if isinstance(value, dict):
        if len(value) == 1:
            if _BYTES in value and isinstance(value[_BYTES], str):
                return base64.b64decode(value[_BYTES], validate=True)
            if _DICT in value and isinstance(value[_DICT], dict):
                return {key: decode_value(item) for key, item in value[_DICT].items()}
        return {key: decode_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode_value(item) for item in value]
    return value


def serialize_checkpoint(checkpoint: AgentCheckpoint) -> str:
    """JSON text of a checkpoint; ``bytes`` inside parts survive the round trip."""
    return json.dumps(encode_value(checkpoint), ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def deserialize_checkpoint(text: str | bytes) -> AgentCheckpoint:
    """A checkpoint from :func:`serialize_checkpoint` text; raises CheckpointCorruptError for anything else."""
    try:
        value = decode_value(json.loads(text))
    except (ValueError, TypeError) as exc:
        raise CheckpointCorruptError(f"Checkpoint text does not decode: {exc}") from exc
    if not isinstance(value, dict) or "run_id" not in value or "messages" not in value:
        raise CheckpointCorruptError("Checkpoint text is not an AgentCheckpoint object.")
    version = value.get("version")
    if type(version) is not int or version != CHECKPOINT_VERSION:
        raise CheckpointCorruptError(
            f"Checkpoint schema version {version!r} is not supported (expected {CHECKPOINT_VERSION})."
        )
    return value  # type: ignore[return-value]
