"""Serializers of what the runs API answers: runs, checkpoints, approval requests and errors. They render only.

A view reads (selectors) and hands the values in: a run's detail arrives as a ``RunDetail``, and whether the
reader may see approval tokens as the context key ``SHOW_TOKENS`` (True only for users who may decide, because a
token is a bearer credential for the verdict). Serializers whose instance is a runtime dict (checkpoints,
approval requests, effects, usage) declare their fields for the OpenAPI document and render the dict through
the checkpoint codec, so the JSON is exactly what the runtime stores and bytes never break it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rest_framework import serializers

from approvals.models import ApprovalRequest
from runs.models import Effect, Leg, Run, Thread
from runs.presenters.leg_ends import LegEnd
from runs.presenters.outcome import OUTCOME_KINDS, Outcome
from runs.runtime.codec import encode_value
from runs.runtime.usage import normalize_usage

__all__ = [
    "AgentCheckpointSerializer",
    "ApprovalRequestSerializer",
    "EffectSerializer",
    "ErrorSerializer",
    "LegInterruptionSerializer",
    "LegSerializer",
    "MessageSerializer",
    "RunDetail",
    "RunDetailSerializer",
    "RunSerializer",
    "RunSummary",
    "SHOW_TOKENS",
    "ThreadDetail",
    "ThreadDetailSerializer",
    "ThreadSerializer",
    "ToolApprovalRequestSerializer",
]

#: Serializer context key: True when the reader may decide approvals, and so may see their tokens.
SHOW_TOKENS = "show_tokens"


@dataclass(frozen=True)
class RunSummary:
    """A run with what every answer about it shows besides its own fields (its outcome and every approval request
    with its verdict), read by the view."""

    run: Run
    outcome: Outcome
    approvals: list[dict[str, Any]]

    def __getattr__(self, name: str) -> Any:
        # Only called for names the dataclass lacks: the run's own fields (run_id, status, usage...).
        if name == "run":
            raise AttributeError(name)
        return getattr(self.run, name)


@dataclass(frozen=True)
class RunDetail(RunSummary):
    """A run with what its detail answer shows besides its own fields, read by the view."""

    input_messages: list[dict[str, Any]]
    pending_approvals: list[dict[str, Any]]
    legs: Sequence[LegEnd]
    effects: list[dict[str, Any]]


def _without_tokens(requests: Any, context: dict[str, Any]) -> Any:
    if context.get(SHOW_TOKENS):
        return requests
    return [{key: value for key, value in request.items() if key != "token"} for request in requests or ()]


# --------------------------------------------------------------------------- documented dicts


class _CodecDictSerializer(serializers.Serializer):
    """Renders a runtime dict as the codec encodes it; the declared fields document its shape."""

    def to_representation(self, instance: Any) -> Any:
        return encode_value(instance)


class ErrorSerializer(serializers.Serializer):
    """Every error answer: a message, plus field errors (field name -> list of messages) for 400s."""

    detail = serializers.CharField()


class UsageSerializer(_CodecDictSerializer):
    """Token counts: the three counters always (0 for a leg that called no model), cache counts and cost when
    known."""

    input_tokens = serializers.IntegerField(help_text="Every prompt token, cached ones included.")
    output_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    cache_read_tokens = serializers.IntegerField(required=False, help_text="Of input_tokens, read from the cache.")
    cache_write_tokens = serializers.IntegerField(required=False, help_text="Of input_tokens, written to it.")
    cost = serializers.FloatField(required=False)

    def to_representation(self, instance: Any) -> Any:
        # Rows written before every leg stored the three counters hold {}; they are told as zeros.
        return encode_value(normalize_usage(instance))


class MessageSerializer(_CodecDictSerializer):
    """A runtime Message; ``content`` is a string or a list of parts (text, tool_call, tool_result...)."""

    role = serializers.ChoiceField(choices=["system", "user", "assistant", "tool"])
    content = serializers.JSONField(help_text="A string, or a list of parts: {'type': 'text', 'text': ...}, ...")


class ToolApprovalRequestSerializer(_CodecDictSerializer):
    """A call waiting for a reviewer, with the signed token a verdict must echo (for those who may decide)."""

    approval_id = serializers.CharField()
    tool_call_id = serializers.CharField()
    tool_name = serializers.CharField()
    input = serializers.DictField()
    agent_path = serializers.ListField(child=serializers.CharField(), required=False)
    token = serializers.CharField(
        required=False, help_text="Present only for users who may decide approvals: it authorizes the verdict."
    )

    def to_representation(self, instance: Any) -> Any:
        (request,) = _without_tokens([instance], self.context)
        return encode_value(request)


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

    def to_representation(self, instance: Any) -> Any:
        if "pending_approvals" in instance:
            instance = {**instance, "pending_approvals": _without_tokens(instance["pending_approvals"], self.context)}
        return encode_value(instance)


# --------------------------------------------------------------------------- runs


class LegInterruptionSerializer(serializers.Serializer):
    """How a leg whose worker died ended (runs.presenters.leg_ends): its ``ended_at`` stays null, as stored."""

    last_seen_at = serializers.DateTimeField(help_text="Its last sign of life: its last journal part or checkpoint.")
    detected_at = serializers.DateTimeField(
        help_text="When its death was detected: the next leg's start, or the run's last change when none followed.")
    last_step = serializers.IntegerField(allow_null=True, help_text="The last step it checkpointed; null if none.")
    gap_seconds = serializers.FloatField(help_text="From its last sign of life to the detection.")
    next_leg = serializers.IntegerField(source="next_leg_number", allow_null=True,
                                        help_text="The number of the leg that went on; null if none did.")


class LegSerializer(serializers.ModelSerializer):
    """A leg of the run, read from a runs.presenters.leg_ends.LegEnd (the leg's fields, as stored, and how it
    ended)."""

    usage = UsageSerializer()
    interruption = LegInterruptionSerializer(
        allow_null=True, read_only=True,
        help_text="Null unless the leg was interrupted: its worker died (ended_at stays null) and a later leg "
        "went on, or the run stopped running.")

    class Meta:
        model = Leg
        fields = ["number", "kind", "owner_epoch", "worker_id", "started_at", "ended_at", "finish_reason", "usage",
                  "error", "interruption"]
        read_only_fields = fields


class RunOutcomeSerializer(serializers.Serializer):
    """What the run came to (runs.presenters.outcome), for clients to branch on."""

    kind = serializers.ChoiceField(
        choices=OUTCOME_KINDS,
        help_text="denied: the run ended after a denial (an expired request is a denial by nobody); in_progress: "
        "queued, running, waiting for a verdict or a retry.")
    summary = serializers.CharField(source="label", help_text="One sentence, as the run's page says it.")
    by = serializers.CharField(
        source="by.username", allow_null=True,
        help_text="The username of the person whose act decided it (approver, denier, who cancelled); null for an "
        "act of the system.")


class RunApprovalSerializer(serializers.Serializer):
    """One approval request of the run, decided or not (runs.presenters.outcome.run_approvals_told)."""

    approval_id = serializers.CharField()
    tool_name = serializers.CharField()
    status = serializers.ChoiceField(choices=ApprovalRequest.Status.choices, help_text="As of now: a pending request "
                                     "past its expiry is expired.")
    verdict = serializers.ChoiceField(choices=["approved", "denied", "expired", "superseded"], allow_null=True,
                                      help_text="null: no verdict (pending, or cancelled with the run).")
    decided_by = serializers.CharField(allow_null=True, help_text="A username; null for an act of the system.")
    decided_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField(allow_blank=True)


class ForkOriginSerializer(serializers.Serializer):
    """Where a forked run started: the run and the step of the checkpoint it was forked from."""

    run_id = serializers.CharField(source="forked_from.run_id", allow_null=True,
                                   help_text="The origin run; null if that run was deleted since.")
    step_index = serializers.IntegerField(source="forked_from_step")

    def to_representation(self, instance: Any) -> Any:
        run = getattr(instance, "run", instance)  # a RunSummary or a Run
        if run.forked_from_step is None:
            return None
        return {"run_id": run.forked_from.run_id if run.forked_from is not None else None,
                "step_index": run.forked_from_step}


class RunSerializer(serializers.ModelSerializer):
    """A run as lists show it: status, counters, outcome and approvals, without legs, effects or pending approvals."""

    status_display = serializers.CharField(source="get_status_display", help_text="The status as people read it.")
    usage = UsageSerializer(help_text="Cumulative over every leg.")
    outcome = RunOutcomeSerializer(read_only=True)
    approvals = RunApprovalSerializer(many=True, read_only=True, help_text="Every request of the run, oldest first.")
    metadata = serializers.DictField(help_text="The JSON object the run was started with ({} when none), as given.")
    thread_id = serializers.CharField(source="thread.thread_id", allow_null=True,
                                      help_text="The thread the run is a turn of; null outside a thread.")
    turn = serializers.IntegerField(allow_null=True, help_text="Its turn in the thread (1 for the first); null "
                                    "outside a thread.")
    forked_from = ForkOriginSerializer(
        source="*", read_only=True, allow_null=True,
        help_text="The run and step this run was forked from (POST .../checkpoints/{step_index}/fork/); null for a "
        "run that is not a fork.")

    class Meta:
        model = Run
        fields = ["run_id", "agent", "status", "status_display", "step_index", "usage", "finish_reason", "error",
                  "cancel_requested", "owner_epoch", "created_at", "updated_at", "retry_at", "retry_attempt",
                  "retry_limit", "outcome", "approvals", "metadata", "thread_id", "turn", "forked_from"]
        read_only_fields = fields


class RunDetailSerializer(RunSerializer):
    """A RunDetail: the run with its input, pending approvals (tokens for deciders only), legs and effects."""

    # Here, not in lists: run_get joins the user, run_list does not (one query per row).
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    input_messages = MessageSerializer(many=True, read_only=True)
    pending_approvals = ToolApprovalRequestSerializer(many=True, read_only=True)
    legs = LegSerializer(many=True, read_only=True)
    effects = EffectSerializer(many=True, read_only=True)

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "created_by", "input_messages", "pending_approvals", "legs", "effects"]
        read_only_fields = fields


# --------------------------------------------------------------------------- threads


@dataclass(frozen=True)
class ThreadDetail:
    """A thread with its turns and the conversation so far, read by the view."""

    thread: Thread
    turns: Sequence[Run]
    messages: list[dict[str, Any]]

    def __getattr__(self, name: str) -> Any:
        if name == "thread":
            raise AttributeError(name)
        return getattr(self.thread, name)


class ThreadTurnSerializer(serializers.ModelSerializer):
    """A turn of a thread: its run (GET /api/runs/{run_id}/ for the rest)."""

    class Meta:
        model = Run
        fields = ["run_id", "status", "created_at"]
        read_only_fields = fields


class ThreadSerializer(serializers.ModelSerializer):
    """A thread as lists show it."""

    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True,
                                              help_text="The username of its creator, who owns it.")
    metadata = serializers.DictField(help_text="The JSON object the thread was started with ({} when none), as given.")

    class Meta:
        model = Thread
        fields = ["thread_id", "agent", "created_by", "created_at", "updated_at", "metadata"]
        read_only_fields = fields


class ThreadDetailSerializer(ThreadSerializer):
    """A ThreadDetail: the thread, its turns (first first) and its history so far."""

    turns = ThreadTurnSerializer(many=True, read_only=True, help_text="Its turns, first first.")
    messages = MessageSerializer(many=True, read_only=True, help_text="The conversation so far: the latest turn's "
                                 "latest messages, tool calls and results included.")

    class Meta(ThreadSerializer.Meta):
        fields = [*ThreadSerializer.Meta.fields, "turns", "messages"]
        read_only_fields = fields


class ApprovalRequestSerializer(serializers.ModelSerializer):
    """An approval request and its verdict (the token is not repeated: it is spent or about to be)."""

    run_id = serializers.CharField(source="run.run_id")
    input = serializers.JSONField(source="tool_input")
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    edited_input = serializers.JSONField(
        allow_null=True, help_text="The input approved instead of the model's (by decided_by), or null.")

    class Meta:
        model = ApprovalRequest
        fields = ["run_id", "approval_id", "tool_call_id", "tool_name", "input", "agent_path", "status", "decided_by",
                  "decided_at", "reason", "issued_at", "expires_at", "edited_input"]
        read_only_fields = fields


class AgentToolEffectSerializer(serializers.Serializer):
    """How a tool's calls go through the effect ledger."""

    operation_key = serializers.BooleanField(help_text="Its operations are business operations shared by every run.")
    reconcile = serializers.BooleanField(help_text="An unknown outcome is read back from the outside system.")
    verify = serializers.BooleanField(help_text="A committed outcome is read back and compared with the request.")


class AgentToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    input_schema = serializers.DictField(help_text="The JSON Schema a call's input is validated against.")
    needs_approval = serializers.ChoiceField(choices=["always", "never", "conditional"],
                                             help_text="conditional: it depends on the call's input.")
    effect = AgentToolEffectSerializer(allow_null=True, help_text="null: the tool has no effect to record.")


class AgentSerializer(serializers.Serializer):
    """An agent a run can name (runs.agents.agent_describe)."""

    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    approvals_decided_by = serializers.ChoiceField(
        choices=["reviewers", "creator"],
        help_text="reviewers: a reviewer who did not start the run; creator: the run's creator (reviewers may too).")
    tools = AgentToolSerializer(many=True)
    problem = serializers.CharField(allow_null=True, help_text="Why the agent cannot be built now (null when it can).")
