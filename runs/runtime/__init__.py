"""Deuz's durable agent runtime: pure Python, no Django. See README.md beside this file."""

from __future__ import annotations

from .deps import Deps, SystemClock
from .effects import Effect, EffectCall
from .engine import PrepareStepContext
from .exceptions import (
    CheckpointCorruptError,
    CheckpointNotFoundError,
    ModelCallError,
    OwnershipLostError,
    RunError,
    RunHalted,
    ScriptExhaustedError,
    StoreUnavailableError,
)
from .loops import generate_text, stream_chat
from .model import LanguageModel
from .results import GenerateTextResult, StepResult, StreamChatResult
from .stop import StopContext, cost_exceeds, step_count_is, total_tokens_exceed
from .subagents import agent_tool
from .tools import Tool, ToolContext, tool
from .types import (
    CLIENT_TOOL_NO_RESULT,
    AgentCheckpoint,
    Message,
    ToolApprovalRequest,
    ToolApprovalResponse,
    Usage,
)

__all__ = [
    "AgentCheckpoint",
    "CLIENT_TOOL_NO_RESULT",
    "CheckpointCorruptError",
    "CheckpointNotFoundError",
    "Deps",
    "Effect",
    "EffectCall",
    "GenerateTextResult",
    "LanguageModel",
    "Message",
    "ModelCallError",
    "OwnershipLostError",
    "PrepareStepContext",
    "RunError",
    "RunHalted",
    "ScriptExhaustedError",
    "StepResult",
    "StopContext",
    "StoreUnavailableError",
    "StreamChatResult",
    "SystemClock",
    "Tool",
    "ToolApprovalRequest",
    "ToolApprovalResponse",
    "ToolContext",
    "Usage",
    "agent_tool",
    "cost_exceeds",
    "generate_text",
    "step_count_is",
    "stream_chat",
    "tool",
    "total_tokens_exceed",
]
