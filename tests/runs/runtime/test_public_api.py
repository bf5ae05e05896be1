"""The runtime's public names are pinned: clients are written against them (shared/spec/RUNTIME_API.md), so
adding or removing one is a deliberate change of this test, never an accident of a refactor."""

from __future__ import annotations

import inspect

import pytest

import runs.runtime
import runs.runtime.durable
import runs.runtime.testing

PUBLIC = {
    runs.runtime: {
        "AgentCheckpoint", "CLIENT_TOOL_NO_RESULT", "CheckpointCorruptError", "CheckpointNotFoundError", "Deps",
        "Effect", "EffectCall", "GenerateTextResult", "LanguageModel", "Message", "ModelCallError", "OwnershipLostError",
        "PrepareStepContext", "RunError", "RunHalted", "ScriptExhaustedError", "StepResult", "StopContext",
        "StoreUnavailableError", "StreamChatResult", "SystemClock", "Tool", "ToolApprovalRequest",
        "ToolApprovalResponse", "ToolContext", "Usage", "agent_tool", "cost_exceeds", "generate_text",
        "step_count_is", "stream_chat", "tool", "total_tokens_exceed",
    },
    runs.runtime.durable: {
        "APPROVAL_TOKEN_DENIAL_REASON", "AgentCheckpoint", "ApprovalSigner", "CheckpointCorruptError",
        "CheckpointNotFoundError", "DONE", "DurableSession", "EffectConflictError", "EffectEntry", "EffectLedger",
        "EffectHeldElsewhere", "EffectNeedsReview", "EffectNotAuthorized", "EffectsStopped", "FollowState", "IDLE", "InMemoryEffectLedger",
        "InMemorySessionStore",
        "InMemoryStreamStateStore", "JournalPage", "OwnedSessionStore", "OwnedStreamStateStore",
        "OwnershipLostError", "SaveHook", "SavedCheckpoint", "SessionStore", "StoreUnavailableError",
        "StreamStateStore", "ToolApprovalRequest", "ToolApprovalResponse", "child_run_id", "create_approval_signer",
        "create_in_memory_session_store", "create_in_memory_stream_state_store", "deserialize_checkpoint",
        "follow_journal", "journal_parts", "load_checkpoint", "resume_from_checkpoint",
        "resume_stream_from_checkpoint", "serialize_checkpoint",
    },
    runs.runtime.testing: {"ScriptedModel"},
}

#: The loops' options, all keyword-only (RUNTIME_API.md: generate_text); the loops check them with CallOptions.
LOOP_OPTIONS = {
    "model", "messages", "tools", "max_steps", "system", "session", "approval_responses", "approve_tool_call",
    "approval_signer", "approval_max_age_ms", "stop_when", "prepare_step", "max_tool_concurrency", "signal", "deps",
}


@pytest.mark.parametrize("module", list(PUBLIC), ids=lambda module: module.__name__)
def test_each_module_exports_exactly_its_pinned_names(module):
    assert set(module.__all__) == PUBLIC[module]


@pytest.mark.parametrize("module", list(PUBLIC), ids=lambda module: module.__name__)
def test_every_exported_name_resolves(module):
    assert [name for name in module.__all__ if not hasattr(module, name)] == []


def test_the_loops_take_every_spec_option_as_a_keyword():
    from runs.runtime.engine import CallOptions

    fields = inspect.signature(CallOptions).parameters.values()
    assert LOOP_OPTIONS - {field.name for field in fields if field.kind is inspect.Parameter.KEYWORD_ONLY} == set()
