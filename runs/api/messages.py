"""The messages a run starts from, as nested serializers; only what a client may say gets in.

  MessageInputSerializer(many=True)     1-MAX_MESSAGES messages
    role                                user, system or assistant
    content: MessageContentField        a string, or a list of 1+ parts
      PartInputSerializer(many=True)    each part checked by the serializer of its "type" (PART_SERIALIZERS)
        TextPartInputSerializer

Tool calls and tool results come from the run's own model and tools. A client's would read, in the timeline a
reviewer trusts, exactly like a real tool's output (a "lookup" saying finance approved the expense: issue 12), so
they are refused with the reason, as are images and files, which JSON input does not carry. Messages and parts
are closed: an unknown key is an error, not silently dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers
from rest_framework.settings import api_settings

__all__ = [
    "ClosedSerializer",
    "INPUT_ROLES",
    "MAX_CONTENT_CHARS",
    "MAX_MESSAGES",
    "MessageContentField",
    "MessageInputSerializer",
    "PART_SERIALIZERS",
    "PartInputSerializer",
    "REFUSED_PART_TYPES",
    "StrictCharField",
    "TOOL_CALLS_REFUSED",
    "TOOL_RESULTS_REFUSED",
    "TextPartInputSerializer",
]

MAX_MESSAGES = 200
MAX_CONTENT_CHARS = 100_000

TOOL_RESULTS_REFUSED = "Tool results come from the run's own tools; a client cannot supply them."
TOOL_CALLS_REFUSED = "Tool calls come from the run's own model; a client cannot supply them."

#: The roles a client may write; "tool" messages hold tool results, which only the run's tools produce.
INPUT_ROLES = ("user", "system", "assistant")

#: Part types that exist in the runtime but are not accepted from a client, with the reason given.
REFUSED_PART_TYPES = {
    "tool_call": TOOL_CALLS_REFUSED,
    "tool_result": TOOL_RESULTS_REFUSED,
    "image": "image parts are not accepted in JSON input; send text parts.",
    "file": "file parts are not accepted in JSON input; send text parts.",
}

_MAX_UNKNOWN_KEYS_SHOWN = 5


class StrictCharField(serializers.CharField):
    """Only JSON strings: DRF's CharField would turn 5 or 1e3 into "5" and "1000.0" and accept them.

    Like every CharField it refuses NUL characters (PostgreSQL cannot store them in text); the OpenAPI document
    says so for this class (runs.api.schema).
    """

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class ClosedSerializer(serializers.Serializer):
    """Refuses keys it does not declare, so a misspelt key is an error instead of silently lost."""

    def to_internal_value(self, data: Any) -> Any:
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, Mapping) else []
        if not unknown:
            return super().to_internal_value(data)
        # The keys are client input: a few, each cut short, are enough to find the typo.
        shown = ", ".join(repr(str(key)[:40]) for key in unknown[:_MAX_UNKNOWN_KEYS_SHOWN])
        message = f"Unknown keys {shown}; expected only {', '.join(self.fields)}."
        try:
            super().to_internal_value(data)
        except serializers.ValidationError as error:
            errors = dict(error.detail)
            errors.setdefault(api_settings.NON_FIELD_ERRORS_KEY, []).append(message)
            raise serializers.ValidationError(errors) from None
        raise serializers.ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [message]})


class TextPartInputSerializer(ClosedSerializer):
    """A text part: {"type": "text", "text": "..."}."""

    type = serializers.ChoiceField(choices=["text"])
    text = StrictCharField(max_length=MAX_CONTENT_CHARS, allow_blank=True, trim_whitespace=False)


#: The serializer of each part type a client may send, chosen by the part's "type".
PART_SERIALIZERS: dict[str, type[serializers.Serializer]] = {"text": TextPartInputSerializer}


class PartInputSerializer(serializers.Serializer):
    """One part: validated by the serializer its "type" selects, or refused with the reason for that type."""

    default_error_messages = {"not_an_object": "Expected a part object with a 'type'."}

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, Mapping):
            self.fail("not_an_object")
        kind = data.get("type")
        if isinstance(kind, str) and kind in REFUSED_PART_TYPES:
            raise serializers.ValidationError({"type": [REFUSED_PART_TYPES[kind]]})
        serializer_class = PART_SERIALIZERS.get(kind) if isinstance(kind, str) else None
        if serializer_class is None:
            raise serializers.ValidationError({"type": [f"Must be one of: {', '.join(PART_SERIALIZERS)}."]})
        return serializer_class(context=self.context).run_validation(data)

    def to_representation(self, instance: Any) -> Any:
        return instance


class MessageContentField(serializers.Field):
    """A message's content: a string of at most MAX_CONTENT_CHARS, or a non-empty list of parts."""

    default_error_messages = {"invalid": "Must be a string or a non-empty list of parts."}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.text = StrictCharField(max_length=MAX_CONTENT_CHARS, allow_blank=True, trim_whitespace=False)
        self.parts = PartInputSerializer(many=True, allow_empty=False)
        self.text.bind(field_name="", parent=self)
        self.parts.bind(field_name="", parent=self)

    def to_internal_value(self, data: Any) -> str | list[dict[str, Any]]:
        if isinstance(data, str):
            return self.text.run_validation(data)
        if isinstance(data, list):
            return self.parts.run_validation(data)
        self.fail("invalid")

    def to_representation(self, value: Any) -> Any:
        return value


class _RoleField(serializers.ChoiceField):
    default_error_messages = {"tool": TOOL_RESULTS_REFUSED}

    def to_internal_value(self, data: Any) -> str:
        if data == "tool":
            self.fail("tool")
        return super().to_internal_value(data)


class MessageInputSerializer(ClosedSerializer):
    """A message a client writes: a role and its content."""

    role = _RoleField(choices=INPUT_ROLES)
    content = MessageContentField(help_text="A string, or a list of text parts: [{\"type\": \"text\", \"text\": ...}].")
