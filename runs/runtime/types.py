"""The runtime's data shapes: plain dicts annotated with TypedDicts, so they serialize and compare as is."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "AgentCheckpoint",
    "CLIENT_TOOL_NO_RESULT",
    "FINISH_REASONS",
    "STEP_FINISH_REASONS",
    "Message",
    "Part",
    "StreamPart",
    "ToolApprovalRequest",
    "ToolApprovalResponse",
    "Usage",
]

#: The ``is_error`` output a client tool gets when a resume cannot hand it a real result.
CLIENT_TOOL_NO_RESULT = "No result provided for this client tool."


class Usage(TypedDict):
    input_tokens: int  # every prompt token, cached ones included
    output_tokens: int
    total_tokens: int
    cache_read_tokens: NotRequired[int]  # of input_tokens, read from the provider's prompt cache
    cache_write_tokens: NotRequired[int]  # of input_tokens, written to it
    cost: NotRequired[float]


class Part(TypedDict, total=False):
    type: str  # text | image | file | tool_call | tool_result
    text: str
    data: bytes
    media_type: str
    tool_call_id: str
    tool_name: str
    input: dict[str, Any]
    input_error: str  # tool_call only: why the model's input could not be used (cut off, not JSON)
    output: Any
    is_error: bool
    edit: dict[str, Any]  # tool_result only: {"input", "by"} when it ran with input a person approved instead

class Message(TypedDict):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[Part]


class ToolApprovalRequest(TypedDict):
    approval_id: str
    tool_call_id: str
    tool_name: str
    input: dict[str, Any]
    agent_path: NotRequired[list[str]]
    token: NotRequired[str]
    operation_id: NotRequired[str]  # the business operation the call would perform (Effect(operation_key=...))


class ToolApprovalResponse(TypedDict):
    approval_id: str
    approved: bool
    reason: NotRequired[str]
    token: NotRequired[str]
    tool_call_id: NotRequired[str]
    decided_by: NotRequired[str | None]  # who gave the verdict, passed on as is in its tool-approval-verdict part


class AgentCheckpoint(TypedDict):
    version: Literal[1]
    run_id: str
    step_id: str
    step_index: int
    status: Literal["running", "suspended", "completed"]
    messages: list[Message]
    usage: Usage
    pending_approvals: NotRequired[list[ToolApprovalRequest]]
    agent_path: NotRequired[list[str]]
    created_at: int


#: Why one model call (a step) ended: final text, tool calls, the output limit, the provider's content filter
#: (a refusal), or something else the provider named.
STEP_FINISH_REASONS = ("stop", "tool-calls", "length", "content-filter", "other")

#: Why a call (one leg) ended; ``length`` and ``content-filter`` are a last step's own reason passed on;
#: ``cancelled`` is an abort the caller's ``cancellation`` named a cancel (its ``cancelled`` part says by whom).
FINISH_REASONS = ("stop", "length", "content-filter", "suspended", "stop-condition", "max-steps", "aborted", "cancelled",
                  "error")

#: Stream parts are dicts with a kebab-case ``type`` (start, step-start, text-delta, ...).
StreamPart = dict[str, Any]
