"""Serializers of the runs API: request bodies and query strings in, runs, checkpoints and approvals out.

Input serializers only check shapes (no logic). Output serializers whose instance is a runtime dict
(checkpoints, approval requests, effects, usage) declare their fields for the OpenAPI document and render the
dict through the checkpoint codec, so the JSON is exactly what the runtime stores and bytes never break it.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from approvals.models import ApprovalRequest
from runs.agents import agent_names
from runs.models import RUN_ID_VALIDATOR, Effect, Leg, Run
from runs.runtime.codec import encode_value
from approvals.selectors import approval_pending_list
from runs.selectors import run_effect_list, run_input_messages, run_leg_list

__all__ = [
    "AgentCheckpointSerializer",
    "ApprovalDecideInputSerializer",
    "ApprovalRequestSerializer",
    "CheckpointListFilterSerializer",
    "EffectSerializer",
    "ErrorSerializer",
    "LegSerializer",
    "MAX_CONTENT_CHARS",
    "MAX_MESSAGES",
    "MessageListField",
    "RunDetailSerializer",
    "RunListFilterSerializer",
    "RunSerializer",
    "RunStartInputSerializer",
    "ToolApprovalRequestSerializer",
]

MAX_MESSAGES = 200
MAX_CONTENT_CHARS = 100_000
MAX_ID_CHARS = 200
MAX_REASON_CHARS = 2000
# A token carries the signed tool input, so it grows with it; the body size limit bounds it anyway.
MAX_TOKEN_CHARS = 200_000

#: Which part types a client may send in each role. Images and files are out of scope for JSON input.
PART_TYPES_BY_ROLE = {
    "user": ("text",),
    "system": ("text",),
    "assistant": ("text", "tool_call"),
    "tool": ("tool_result",),
}
_PART_KEYS = {
    "text": {"type", "text"},
    "tool_call": {"type", "tool_call_id", "tool_name", "input"},
    "tool_result": {"type", "tool_call_id", "tool_name", "output", "is_error"},
}
_MEDIA_PART_TYPES = ("image", "file")
_MAX_ERRORS = 20


# --------------------------------------------------------------------------- documented dicts


class _CodecDictSerializer(serializers.Serializer):
    """Renders a runtime dict as the codec encodes it; the declared fields document its shape."""

    def to_representation(self, instance: Any) -> Any:
        return encode_value(instance)


class ErrorSerializer(serializers.Serializer):
    """Every error answer: a message, plus field errors (field name -> list of messages) for 400s."""

    detail = serializers.CharField()


class UsageSerializer(_CodecDictSerializer):
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    cost = serializers.FloatField(required=False)


class MessageSerializer(_CodecDictSerializer):
    """A runtime Message; ``content`` is a string or a list of parts (text, tool_call, tool_result...)."""

    role = serializers.ChoiceField(choices=list(PART_TYPES_BY_ROLE))
    content = serializers.JSONField(help_text="A string, or a list of parts: {'type': 'text', 'text': ...}, ...")


class ToolApprovalRequestSerializer(_CodecDictSerializer):
    """A call waiting for a reviewer, with the signed token a verdict must echo."""

    approval_id = serializers.CharField()
    tool_call_id = serializers.CharField()
    tool_name = serializers.CharField()
    input = serializers.DictField()
    agent_path = serializers.ListField(child=serializers.CharField(), required=False)
    token = serializers.CharField()


class EffectSerializer(_CodecDictSerializer):
    """One operation of the effect ledger."""

    operation_id = serializers.CharField()
    tool_call_id = serializers.CharField()
    tool_name = serializers.CharField()
    status = serializers.ChoiceField(choices=Effect.Status.choices)
    receipt = serializers.DictField(allow_null=True)


class AgentCheckpointSerializer(_CodecDictSerializer):
    """A stored AgentCheckpoint; bytes in message parts are rendered as {"$bytes": "<base64>"}."""

    version = serializers.IntegerField()
    run_id = serializers.CharField(help_text="The runtime's run id: the run's, or a sub-agent's session key.")
    step_id = serializers.CharField()
    step_index = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["running", "suspended", "completed"])
    messages = MessageSerializer(many=True)
    usage = UsageSerializer()
    pending_approvals = ToolApprovalRequestSerializer(many=True, required=False)
    agent_path = serializers.ListField(child=serializers.CharField(), required=False)
    created_at = serializers.IntegerField(help_text="Milliseconds since the epoch (the runtime's clock).")


# --------------------------------------------------------------------------- runs out


class LegSerializer(serializers.ModelSerializer):
    usage = UsageSerializer()

    class Meta:
        model = Leg
        fields = ["number", "kind", "owner_epoch", "worker_id", "started_at", "ended_at", "finish_reason", "usage",
                  "error"]
        read_only_fields = fields


class RunSerializer(serializers.ModelSerializer):
    """A run as lists show it: status and counters, without legs, effects or pending approvals."""

    status_display = serializers.CharField(source="get_status_display", help_text="The status as people read it.")
    usage = UsageSerializer(help_text="Cumulative over every leg.")

    class Meta:
        model = Run
        fields = ["run_id", "agent", "status", "status_display", "step_index", "usage", "finish_reason", "error",
                  "cancel_requested", "owner_epoch", "created_at", "updated_at", "retry_at", "retry_attempt",
                  "retry_limit"]
        read_only_fields = fields


class RunDetailSerializer(RunSerializer):
    """One run with everything people look at: its input, pending approvals (with tokens), legs and effects."""

    # Here, not in lists: run_get joins the user, run_list does not (one query per row).
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    input_messages = serializers.SerializerMethodField()
    pending_approvals = serializers.SerializerMethodField()
    legs = serializers.SerializerMethodField()
    effects = serializers.SerializerMethodField()

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "created_by", "input_messages", "pending_approvals", "legs", "effects"]
        read_only_fields = fields

    @extend_schema_field(MessageSerializer(many=True))
    def get_input_messages(self, run: Run) -> list[Any]:
        return encode_value(run_input_messages(run))

    @extend_schema_field(ToolApprovalRequestSerializer(many=True))
    def get_pending_approvals(self, run: Run) -> list[Any]:
        return ToolApprovalRequestSerializer([row.as_request() for row in approval_pending_list(run=run)], many=True).data

    @extend_schema_field(LegSerializer(many=True))
    def get_legs(self, run: Run) -> list[Any]:
        return LegSerializer(run_leg_list(run=run), many=True).data

    @extend_schema_field(EffectSerializer(many=True))
    def get_effects(self, run: Run) -> list[Any]:
        return EffectSerializer(run_effect_list(run=run), many=True).data


class ApprovalRequestSerializer(serializers.ModelSerializer):
    """An approval request and its verdict (the token is not repeated: it is spent or about to be)."""

    run_id = serializers.CharField(source="run.run_id")
    input = serializers.JSONField(source="tool_input")
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = ApprovalRequest
        fields = ["run_id", "approval_id", "tool_call_id", "tool_name", "input", "agent_path", "status", "decided_by",
                  "decided_at", "reason", "issued_at", "expires_at"]
        read_only_fields = fields


# --------------------------------------------------------------------------- input


def _run_id_valid(value: str) -> None:
    # fullmatch, not the validator's search: its "$" also matches before a trailing newline.
    if not RUN_ID_VALIDATOR.regex.fullmatch(value):
        raise serializers.ValidationError(RUN_ID_VALIDATOR.message)


class StrictBooleanField(serializers.BooleanField):
    """Only JSON true or false: a verdict must not turn "no" or 0 into something a reviewer did not mean."""

    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid")


@extend_schema_field(MessageSerializer(many=True))
class MessageListField(serializers.Field):
    """The messages a run starts from: 1-MAX_MESSAGES runtime Messages with the parts clients may send."""

    default_error_messages = {
        "not_a_list": "Expected a list of messages.",
        "empty": "Give at least one message.",
        "too_many": f"Give at most {MAX_MESSAGES} messages.",
    }

    def to_internal_value(self, data: Any) -> list[dict[str, Any]]:
        if not isinstance(data, list):
            self.fail("not_a_list")
        if not data:
            self.fail("empty")
        if len(data) > MAX_MESSAGES:
            self.fail("too_many")
        errors: list[str] = []
        messages = [_message_clean(message, f"messages[{index}]", errors) for index, message in enumerate(data)]
        last = messages[-1]
        if last.get("role") == "assistant" and any(
            isinstance(part, dict) and part.get("type") == "tool_call" for part in last.get("content") or ()
        ):
            # The runtime would execute trailing calls as a decided step: the model, not a client, decides.
            errors.append(
                f"messages[{len(messages) - 1}]: the conversation ends with tool calls no tool message answers; "
                "the API does not run tool calls that clients write."
            )
        if errors:
            raise serializers.ValidationError(errors[:_MAX_ERRORS])
        return messages

    def to_representation(self, value: Any) -> Any:
        return encode_value(value)


def _message_clean(message: Any, where: str, errors: list[str]) -> dict[str, Any]:
    if not isinstance(message, dict):
        errors.append(f"{where}: expected an object with 'role' and 'content'.")
        return {}
    unknown = sorted(set(message) - {"role", "content"})
    if unknown:
        errors.append(f"{where}: unknown keys {', '.join(map(repr, unknown))}; a message has 'role' and 'content'.")
    role = message.get("role")
    if not isinstance(role, str) or role not in PART_TYPES_BY_ROLE:
        errors.append(f"{where}.role: must be one of {', '.join(PART_TYPES_BY_ROLE)}.")
        return {}
    content = message.get("content")
    if isinstance(content, str):
        if role == "tool":
            errors.append(f"{where}.content: a tool message holds a list of tool_result parts, not a string.")
        elif len(content) > MAX_CONTENT_CHARS:
            errors.append(f"{where}.content: at most {MAX_CONTENT_CHARS} characters.")
        return {"role": role, "content": content}
    if not isinstance(content, list) or not content:
        errors.append(f"{where}.content: must be a string or a non-empty list of parts.")
        return {}
    parts = [_part_clean(part, role, f"{where}.content[{index}]", errors) for index, part in enumerate(content)]
    return {"role": role, "content": parts}


def _part_clean(part: Any, role: str, where: str, errors: list[str]) -> dict[str, Any]:
    if not isinstance(part, dict):
        errors.append(f"{where}: expected a part object with a 'type'.")
        return {}
    kind = part.get("type")
    allowed = PART_TYPES_BY_ROLE[role]
    if kind in _MEDIA_PART_TYPES:
        errors.append(f"{where}: {kind} parts are not accepted in JSON input; send text parts.")
        return {}
    if not isinstance(kind, str) or kind not in allowed:
        errors.append(f"{where}.type: a {role} message accepts parts of type {', '.join(allowed)}.")
        return {}
    unknown = sorted(set(part) - _PART_KEYS[kind])
    if unknown:
        errors.append(f"{where}: unknown keys {', '.join(map(repr, unknown))} for a {kind} part.")
    if kind == "text":
        text = part.get("text")
        if not isinstance(text, str):
            errors.append(f"{where}.text: must be a string.")
        elif len(text) > MAX_CONTENT_CHARS:
            errors.append(f"{where}.text: at most {MAX_CONTENT_CHARS} characters.")
        return {"type": "text", "text": text}
    cleaned = {"type": kind}
    for key in ("tool_call_id", "tool_name"):
        value = part.get(key)
        if not isinstance(value, str) or not 1 <= len(value) <= MAX_ID_CHARS:
            errors.append(f"{where}.{key}: must be a string of 1-{MAX_ID_CHARS} characters.")
        cleaned[key] = value
    if kind == "tool_call":
        if not isinstance(part.get("input"), dict):
            errors.append(f"{where}.input: must be an object.")
        cleaned["input"] = part.get("input")
    else:
        if "output" not in part:
            errors.append(f"{where}.output: is required.")
        is_error = part.get("is_error", False)
        if not isinstance(is_error, bool):
            errors.append(f"{where}.is_error: must be true or false.")
        cleaned.update(output=part.get("output"), is_error=is_error)
    return cleaned


class RunStartInputSerializer(serializers.Serializer):
    agent = serializers.CharField(max_length=100, help_text="A registered agent name.")
    messages = MessageListField()
    run_id = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=MAX_ID_CHARS,
        trim_whitespace=False,
        validators=[_run_id_valid],
        help_text="1-200 characters of letters, digits, '.', '_', ':' and '-'; minted by the server when absent.",
    )

    def validate_agent(self, value: str) -> str:
        names = agent_names()
        if value not in names:
            raise serializers.ValidationError(f"Unknown agent. Known agents: {', '.join(names)}.")
        return value


class RunListFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=Run.Status.choices, required=False)
    agent = serializers.CharField(max_length=100, required=False)


class CheckpointListFilterSerializer(serializers.Serializer):
    include_sub_agents = serializers.BooleanField(
        required=False, default=False, help_text="Also list the checkpoints of the run's sub-agents."
    )


class ApprovalDecideInputSerializer(serializers.Serializer):
    approved = StrictBooleanField(help_text="true to approve the call, false to deny it.")
    token = serializers.CharField(
        max_length=MAX_TOKEN_CHARS, trim_whitespace=False, help_text="The token of the pending approval request."
    )
    reason = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=MAX_REASON_CHARS,
        help_text="Why; shown to the model with a denial.",
    )
