"""Serializers of what the runs API reads: request bodies and query strings, and the ids in its URLs. They check
shapes, nothing else.

Every value is the type the OpenAPI document says (a JSON string is a string, not 5; a boolean is true or false),
so the document and the answers agree. An empty optional query value (``?status=``) is the same as an absent one,
as DRF reads form values and as the events endpoint reads ``?cursor=``; the document says so for each of them
(runs.api.schema.empty_query_values_documented). Any other value that is not valid is a 400.
"""

from __future__ import annotations

import json
import re
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from approvals.errors import ApprovalNotFound
from runs.agents import agent_names
from runs.api.messages import (
    MAX_MESSAGES,
    ClosedSerializer,
    MessageContentField,
    MessageInputSerializer,
    StrictCharField,
)
from runs.errors import CheckpointNotFound, EffectNotFound, RunNotFound, ThreadNotFound
from runs.models import RUN_ID_VALIDATOR, Run

__all__ = [
    "ApprovalDecideInputSerializer",
    "CheckpointListFilterSerializer",
    "MAX_ID_CHARS",
    "MAX_METADATA_BYTES",
    "MAX_REASON_CHARS",
    "MAX_TOKEN_CHARS",
    "MAX_USERNAME_CHARS",
    "METADATA_FILTER_PREFIX",
    "MetadataField",
    "RunCancelInputSerializer",
    "RunForkInputSerializer",
    "RunListFilterSerializer",
    "RunStartInputSerializer",
    "ThreadMessageInputSerializer",
    "ThreadStartInputSerializer",
    "path_approval_id",
    "path_operation_id",
    "path_run_id",
    "path_step_index",
    "path_thread_id",
]

MAX_ID_CHARS = 200
MAX_AGENT_CHARS = 100
MAX_REASON_CHARS = 2000
MAX_USERNAME_CHARS = 150  # django.contrib.auth's username max_length
#: The largest ``metadata`` a run keeps: its compact JSON in UTF-8.
MAX_METADATA_BYTES = 16 * 1024
#: ``?metadata.KEY=VALUE`` lists runs whose metadata has the string VALUE at its top-level KEY.
METADATA_FILTER_PREFIX = "metadata."
_METADATA_KEY = re.compile(r"[A-Za-z0-9_.:-]{1,100}")
# A token carries the signed tool input, so it grows with it; the body size limit bounds it anyway.
MAX_TOKEN_CHARS = 200_000


class StrictBooleanField(serializers.BooleanField):
    """Only JSON true or false: a verdict must not turn "no" or 0 into something a reviewer did not mean."""

    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid")


class QueryBooleanField(serializers.BooleanField):
    """A query flag as OpenAPI writes booleans: exactly ``true`` or ``false``."""

    default_error_messages = {"invalid": "Must be true or false."}
    # DRF's BooleanField reads an absent key of a QueryDict as False (an unticked checkbox); absent is the default.
    default_empty_html = empty

    def to_internal_value(self, data: Any) -> bool:
        if data in ("true", "false"):
            return data == "true"
        self.fail("invalid")


class AgentField(serializers.ChoiceField):
    """A registered agent's name; the choices are read when the serializer is made, so settings can change them."""

    default_error_messages = {"invalid_choice": "Unknown agent. Known agents: {known}."}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=agent_names(), **kwargs)

    def fail(self, key: str, **kwargs: Any) -> None:
        # The name is not echoed: it is client input of any length; the known names are what helps.
        super().fail(key, known=", ".join(self.choices), **kwargs)


def metadata_size(value: Any) -> int:
    """How many bytes ``value`` is as compact JSON in UTF-8: what MAX_METADATA_BYTES bounds."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


@extend_schema_field({"type": "object", "additionalProperties": True})
class MetadataField(serializers.JSONField):
    """A client's own JSON object, at most MAX_METADATA_BYTES as compact JSON; kept and returned as given."""

    default_error_messages = {
        "not_an_object": "Must be a JSON object.",
        "too_big": f"Must be at most {MAX_METADATA_BYTES} bytes as compact JSON (UTF-8); this one is {{size}}.",
    }

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            self.fail("not_an_object")
        size = metadata_size(data)
        if size > MAX_METADATA_BYTES:
            self.fail("too_big", size=size)
        return data


def _id_field(kind: str) -> StrictCharField:
    """A client-minted id of a run or thread: optional, the charset of run ids."""
    return StrictCharField(
        required=False,
        allow_null=True,
        min_length=1,
        max_length=MAX_ID_CHARS,
        trim_whitespace=False,
        validators=[RUN_ID_VALIDATOR],
        help_text=f"The {kind}'s id: 1-200 characters of letters, digits, '.', '_', ':' and '-'; minted by the "
        "server when absent.",
    )


#: A start body has no webhook of its own: webhooks are subscriptions, notified of every run their owner may read.
WEBHOOK_IN_START_BODY = (
    "A run takes no webhook: subscribe once with POST /api/webhooks/ {\"url\", \"events\"}, and every run you may "
    "read is delivered to it."
)


class RunStartInputSerializer(ClosedSerializer):
    """A start body. Closed: an unknown key is a 400 naming it, not silently dropped (issue 22: "webhook" and
    "metadata" were), and "webhook" says where webhooks are made."""

    agent = AgentField(help_text="A registered agent's name.")
    messages = MessageInputSerializer(
        many=True,
        allow_empty=False,
        max_length=MAX_MESSAGES,
        help_text=f"1-{MAX_MESSAGES} messages the run starts from. Clients write user, system and assistant text; "
        "tool calls and tool results come from the run itself and are refused.",
    )
    run_id = _id_field("run")
    metadata = MetadataField(
        required=False,
        help_text=f"Your own JSON object, at most {MAX_METADATA_BYTES} bytes as compact JSON: kept with the run, "
        "returned as given, and filterable with ?metadata.KEY=VALUE on a top-level string.",
    )

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict) and "webhook" in data:
            raise serializers.ValidationError({"webhook": [WEBHOOK_IN_START_BODY]})
        return super().to_internal_value(data)


class ThreadStartInputSerializer(ClosedSerializer):
    """A new thread: its agent, and optionally its id and metadata. Its turns come with its messages."""

    agent = AgentField(help_text="A registered agent's name: every turn of the thread runs it.")
    thread_id = _id_field("thread")
    metadata = MetadataField(
        required=False,
        help_text=f"Your own JSON object, at most {MAX_METADATA_BYTES} bytes as compact JSON: kept with the thread, "
        "returned as given.",
    )


class ThreadMessageInputSerializer(ClosedSerializer):
    """The next user message of a thread; the history is the thread's own, never the client's."""

    content = MessageContentField(
        help_text="The user's message: a string, or a list of text parts: [{\"type\": \"text\", \"text\": ...}].")
    run_id = _id_field("new turn's run")


class RunListFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=Run.Status.choices, required=False, help_text="Only runs in this status.")
    agent = StrictCharField(
        max_length=MAX_AGENT_CHARS, required=False, trim_whitespace=False, help_text="Only runs of this agent."
    )
    created_by = StrictCharField(
        max_length=MAX_USERNAME_CHARS,
        required=False,
        trim_whitespace=False,
        help_text="Only runs started by the user with this username (of those you may read).",
    )

    def to_internal_value(self, data: Any) -> Any:
        """The declared filters, plus ``metadata``: each ``?metadata.KEY=VALUE`` as {KEY: VALUE} (empty: none)."""
        metadata, errors = {}, []
        for name in data:
            if not name.startswith(METADATA_FILTER_PREFIX):
                continue
            key, value = name[len(METADATA_FILTER_PREFIX):], data.get(name)
            if not _METADATA_KEY.fullmatch(key):
                errors.append("Write metadata.KEY=VALUE, KEY 1-100 letters, digits, '_', '.', ':' or '-'.")
            elif len(value) > MAX_METADATA_BYTES:
                errors.append(f"The value of metadata.{key} is longer than any metadata ({MAX_METADATA_BYTES}).")
            elif value:
                metadata[key] = value
        validated = super().to_internal_value(data)  # raises the declared filters' errors first
        if errors:
            raise serializers.ValidationError({"metadata": errors})
        return {**validated, "metadata": metadata} if metadata else validated


class CheckpointListFilterSerializer(serializers.Serializer):
    include_sub_agents = QueryBooleanField(
        required=False, default=False, help_text="Also list the checkpoints of the run's sub-agents."
    )


def _reason_field(help_text: str) -> StrictCharField:
    """A person's optional reason: blank when not given, at most MAX_REASON_CHARS characters."""
    return StrictCharField(
        required=False, allow_blank=True, default="", max_length=MAX_REASON_CHARS, help_text=help_text
    )


class ApprovalDecideInputSerializer(ClosedSerializer):
    """A verdict; an unknown key is refused, so a misspelt ``edited_input`` never approves the model's own input."""

    approved = StrictBooleanField(help_text="true to approve the call, false to deny it.")
    token = StrictCharField(
        max_length=MAX_TOKEN_CHARS, trim_whitespace=False, help_text="The token of the pending approval request."
    )
    reason = _reason_field("Why; shown to the model with a denial.")
    edited_input = serializers.DictField(
        required=False,
        help_text="With an approval: the input to call the tool with instead of the model's, validated against the "
        "tool's input_schema (else 400 and nothing is decided). The server signs it as the request's next revision; "
        "the token stays the original request's.",
    )


class RunCancelInputSerializer(ClosedSerializer):
    """The optional body of a cancel; no body at all is a cancel without a reason."""

    reason = _reason_field(
        "Why; recorded with who cancelled, shown on the run's page and in the stream's cancelled part."
    )


class RunForkInputSerializer(ClosedSerializer):
    """The optional body of a fork; no body at all mints the new run's id from the origin's."""

    run_id = _id_field("new run")


# Ids no run, request or effect can have are 404s before any query (a NUL byte would upset PostgreSQL).


def path_run_id(value: str) -> str:
    """The run id of a URL, or RunNotFound."""
    if not RUN_ID_VALIDATOR.regex.fullmatch(value):
        raise RunNotFound(value[:200])
    return value


def path_step_index(run_id: str, value: str) -> int:
    """The step index of a URL (0 to 999999999: a column's integer), or CheckpointNotFound."""
    if not re.fullmatch(r"[0-9]{1,9}", value):
        raise CheckpointNotFound(run_id, value[:20])
    return int(value)


def path_thread_id(value: str) -> str:
    """The thread id of a URL, or ThreadNotFound."""
    if not RUN_ID_VALIDATOR.regex.fullmatch(value):
        raise ThreadNotFound(value[:200])
    return value


def path_approval_id(run_id: str, value: str) -> str:
    """The approval id of a URL, or ApprovalNotFound."""
    if not 1 <= len(value) <= MAX_ID_CHARS or "\x00" in value:
        raise ApprovalNotFound(run_id, value[:MAX_ID_CHARS])
    return value


def path_operation_id(run_id: str, value: str) -> str:
    """The operation id of a URL (an effect's, up to 500 characters), or EffectNotFound."""
    if not 1 <= len(value) <= 500 or "\x00" in value:
        raise EffectNotFound(run_id, value[:500])
    return value
