"""The stream parts a run's journal can carry, as OpenAPI schemas: one per ``type``, joined in ``StreamPart``, a
union discriminated by ``type`` (SERVICE.md, "Added precise points").

Each ``data:`` line of ``GET /api/runs/{run_id}/events/`` (and each WebSocket frame's ``part``) is one of these.
A part a sub-agent emitted carries ``agent_path`` (agent names, outermost first); the top-level agent's parts
carry none. The schemas are closed (``additionalProperties: false``), so a part with a field they do not name fails
the test that validates every run shape's stream against them (tests/runs/execution/test_stream_schema.py).
"""

from __future__ import annotations

from typing import Any

from runs.agents.retries import RETRY_PART_TYPE
from runs.runtime.types import FINISH_REASONS, STEP_FINISH_REASONS

__all__ = ["EVENT_STREAM_SCHEMA", "EXAMPLE_STREAM", "stream_part_components"]

_REF = "#/components/schemas/"

_STRING = {"type": "string"}
_NULLABLE_STRING = {"type": "string", "nullable": True}
_INTEGER = {"type": "integer"}
_EDIT = {
    "type": "object",
    "description": "Edit, then approve: the input the call ran with instead of the model's (signed by the server), "
                   "and the username of whoever edited and approved it.",
    "properties": {"input": {"type": "object", "additionalProperties": True}, "by": _NULLABLE_STRING},
    "required": ["input", "by"],
    "additionalProperties": False,
}
_AGENT_PATH = {
    "type": "array",
    "items": _STRING,
    "minItems": 1,
    "description": "Present only on a sub-agent's parts: the agent names from the outermost to the innermost.",
}

_USAGE = {
    "type": "object",
    "properties": {
        "input_tokens": _INTEGER,
        "output_tokens": _INTEGER,
        "total_tokens": _INTEGER,
        "cache_read_tokens": _INTEGER,
        "cache_write_tokens": _INTEGER,
        "cost": {"type": "number"},
    },
    "required": ["input_tokens", "output_tokens", "total_tokens"],
    "additionalProperties": False,
}

_APPROVAL_REQUEST = {
    "type": "object",
    "description": "The ToolApprovalRequest; its token only for users who may decide approvals.",
    "properties": {
        "approval_id": _STRING,
        "tool_call_id": _STRING,
        "tool_name": _STRING,
        "input": {"type": "object", "additionalProperties": True},
        "agent_path": {"type": "array", "items": _STRING},
        "token": _STRING,
        "operation_id": _STRING,
    },
    "required": ["approval_id", "tool_call_id", "tool_name", "input"],
    "additionalProperties": False,
}

#: Each part type: (component name, description, properties, required properties besides ``type``).
_PARTS: dict[str, tuple[str, str, dict[str, Any], list[str]]] = {
    "start": ("StreamPartStart", "The run's first part (once per run, not repeated by later legs).",
              {"run_id": _NULLABLE_STRING}, ["run_id"]),
    "step-start": ("StreamPartStepStart", "A step (a model call and its tool calls) begins.",
                   {"step_index": _INTEGER}, ["step_index"]),
    "text-delta": ("StreamPartTextDelta", "A piece of the assistant's text.", {"text": _STRING}, ["text"]),
    "tool-call": ("StreamPartToolCall", "The model calls a tool; input_error when its input could not be used.",
                  {"tool_call_id": _STRING, "tool_name": _STRING, "input": {"type": "object", "additionalProperties": True},
                   "input_error": _STRING},
                  ["tool_call_id", "tool_name", "input"]),
    "tool-approval-request": ("StreamPartToolApprovalRequest", "A gated call waits for a reviewer's verdict.",
                              {"approval": _APPROVAL_REQUEST}, ["approval"]),
    "tool-approval-verdict": (
        "StreamPartToolApprovalVerdict",
        "The verdict a suspended call was settled with, before its tool-result: decided_by is the reviewer's "
        "username, null when nobody decided (an expired or superseded request, a token that did not verify).",
        {"approval_id": _NULLABLE_STRING, "tool_call_id": _STRING, "approved": {"type": "boolean"},
         "reason": _STRING, "decided_by": _NULLABLE_STRING,
         "edited": {"type": "boolean", "description": "True when the approver edited the input before approving; "
                    "then edit says how."},
         "edit": _EDIT},
        ["approval_id", "tool_call_id", "approved", "reason", "decided_by", "edited"],
    ),
    "tool-result": ("StreamPartToolResult", "A tool call's result (is_error for a failure or a denial); edit when "
                    "it ran with an input a person approved instead of the model's.",
                    {"tool_call_id": _STRING, "tool_name": _STRING, "output": {"nullable": True},
                     "is_error": {"type": "boolean"}, "edit": _EDIT},
                    ["tool_call_id", "tool_name", "output", "is_error"]),
    "step-finish": ("StreamPartStepFinish", "A step ends, with its usage.",
                    {"step_index": _INTEGER, "usage": _USAGE,
                     "finish_reason": {"type": "string", "enum": list(STEP_FINISH_REASONS)}},
                    ["step_index", "usage", "finish_reason"]),
    "finish": ("StreamPartFinish", "A leg ends (suspended, stop, cancelled...), with the leg's usage.",
               {"finish_reason": {"type": "string", "enum": list(FINISH_REASONS)}, "usage": _USAGE},
               ["finish_reason", "usage"]),
    "error": ("StreamPartError", "The leg failed (secrets redacted); retryable when a later leg may succeed.",
              {"error": {"type": "object", "properties": {"name": _STRING, "message": _STRING},
                         "required": ["name", "message"], "additionalProperties": False},
               "retryable": {"type": "boolean"}, "retry_after_ms": {"type": "integer", "nullable": True}},
              ["error", "retryable", "retry_after_ms"]),
    "recovery": ("StreamPartRecovery", "A new leg restarts an interrupted step: drop what that step had shown.",
                 {"restarted_step_index": _INTEGER, "message": _STRING}, ["restarted_step_index", "message"]),
    RETRY_PART_TYPE: ("StreamPartRetry", "A transient model error: the run is retried at retry_at (ms since the "
                      "epoch).",
                      {"attempt": _INTEGER, "max_attempts": _INTEGER, "retry_at": _INTEGER, "delay_ms": _INTEGER,
                       "reason": _STRING, "message": _STRING},
                      ["attempt", "max_attempts", "retry_at", "delay_ms", "reason", "message"]),
    "cancelled": ("StreamPartCancelled", "The run was cancelled (before its cancelled finish): by is a username, "
                  "null for the system.",
                  {"by": _NULLABLE_STRING, "reason": _STRING}, ["by", "reason"]),
}


def _part_schema(kind: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "properties": {"type": {"type": "string", "enum": [kind]}, **properties, "agent_path": _AGENT_PATH},
        "required": ["type", *required],
        "additionalProperties": False,
    }


#: One event of the stream, as OpenAPI before 3.2 reads a text/event-stream schema (schemathesis checks each event
#: against it): its fields once parsed.
_RUN_EVENT = {
    "type": "object",
    "description": "One Server-Sent Event of the stream, once parsed.",
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9]+$", "description": "The part's seq (a parser may repeat the last "
               "one on [DONE], which has none)."},
        "event": {"type": "string", "description": "Always the default, message."},
        "data": {"type": "string", "description": "One StreamPart as JSON, or [DONE]."},
        "retry": {"type": "integer", "description": "The reconnection delay in ms (retry: 1000, once at the start)."},
    },
    "required": ["data"],
}

#: The events endpoint's text/event-stream schema: each event (for tools that read the schema per event, as OpenAPI
#: before 3.2 says), or the whole body as text (for clients that read it as one value, e.g. generated ones, which
#: must not parse a stream as one JSON object); ``x-sse-data`` names the schema of each event's data.
EVENT_STREAM_SCHEMA = {
    "anyOf": [{"$ref": _REF + "RunEvent"}, {"type": "string"}],
    "x-sse-data": {"$ref": _REF + "StreamPart"},
}


def stream_part_components() -> dict[str, dict[str, Any]]:
    """The components: one schema per part type, ``StreamPart``, their union discriminated by ``type``, and
    ``RunEvent``, an event of the stream."""
    components = {name: _part_schema(kind, *rest) for kind, (name, *rest) in _PARTS.items()}
    components["RunEvent"] = _RUN_EVENT
    components["StreamPart"] = {
        "description": "One part of a run's stream (an SSE event's data, a WebSocket frame's part).",
        "oneOf": [{"$ref": _REF + name} for name, *_ in _PARTS.values()],
        "discriminator": {"propertyName": "type", "mapping": {kind: _REF + name for kind, (name, *_) in _PARTS.items()}},
    }
    return components


#: An example stream: a coder run resumed after its sub-agent's run_shell was approved (shortened).
EXAMPLE_STREAM = """\
retry: 1000
: following

id: 0
data: {"type":"start","run_id":"r-42"}

id: 1
data: {"type":"step-start","step_index":0}

id: 2
data: {"type":"text-delta","text":"I will hand this to the coder."}

id: 3
data: {"type":"tool-call","tool_call_id":"c1","tool_name":"coder","input":{"prompt":"Fix the failing test"}}

id: 4
data: {"type":"step-start","step_index":0,"agent_path":["coder"]}

id: 5
data: {"type":"tool-call","tool_call_id":"s1","tool_name":"run_shell","input":{"command":"pytest -q"},\
"agent_path":["coder"]}

id: 6
data: {"type":"tool-approval-request","approval":{"approval_id":"a1","tool_call_id":"s1","tool_name":"run_shell",\
"input":{"command":"pytest -q"},"agent_path":["coder"]}}

id: 7
data: {"type":"finish","finish_reason":"suspended","usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0}}

id: 8
data: {"type":"tool-approval-verdict","approval_id":"a1","tool_call_id":"s1","approved":true,"reason":"",\
"decided_by":"rita","edited":false,"agent_path":["coder"]}

id: 9
data: {"type":"tool-result","tool_call_id":"s1","tool_name":"run_shell","output":{"exit_code":0},"is_error":false,\
"agent_path":["coder"]}

id: 10
data: {"type":"tool-result","tool_call_id":"c1","tool_name":"coder","output":"All tests pass.","is_error":false}

id: 11
data: {"type":"finish","finish_reason":"stop","usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0}}

data: [DONE]

"""
