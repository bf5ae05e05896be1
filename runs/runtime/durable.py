"""Durability: checkpoints, stores, the codec, resuming, and signed approvals."""

from __future__ import annotations

from .approvals import APPROVAL_TOKEN_DENIAL_REASON
from .codec import deserialize_checkpoint, serialize_checkpoint
from .effect_ledger import EffectEntry, EffectLedger, InMemoryEffectLedger
from .engine import DurableSession
from .exceptions import (
    CheckpointCorruptError,
    CheckpointNotFoundError,
    EffectConflictError,
    EffectHeldElsewhere,
    EffectNeedsReview,
    EffectNotAuthorized,
    EffectsStopped,
    OwnershipLostError,
    StoreUnavailableError,
)
from .loops import load_checkpoint
from .resume import resume_from_checkpoint, resume_stream_from_checkpoint
from .signer import ApprovalSigner, create_approval_signer
from .stores import (
    InMemorySessionStore,
    OwnedSessionStore,
    SavedCheckpoint,
    SaveHook,
    SessionStore,
    create_in_memory_session_store,
)
from .subagents import child_run_id
from .types import AgentCheckpoint, ToolApprovalRequest, ToolApprovalResponse
from .wire import (
    DONE,
    IDLE,
    FollowState,
    InMemoryStreamStateStore,
    JournalPage,
    OwnedStreamStateStore,
    StreamStateStore,
    create_in_memory_stream_state_store,
    follow_journal,
    journal_parts,
)

__all__ = [
    "APPROVAL_TOKEN_DENIAL_REASON",
    "DONE",
    "FollowState",
    "IDLE",
    "InMemoryStreamStateStore",
    "JournalPage",
    "OwnedSessionStore",
    "OwnedStreamStateStore",
    "SaveHook",
    "SavedCheckpoint",
    "StreamStateStore",
    "create_in_memory_stream_state_store",
    "follow_journal",
    "journal_parts",
    "AgentCheckpoint",
    "ApprovalSigner",
    "CheckpointCorruptError",
    "CheckpointNotFoundError",
    "DurableSession",
    "EffectConflictError",
    "EffectEntry",
    "EffectLedger",
    "EffectHeldElsewhere",
    "EffectNeedsReview",
    "EffectNotAuthorized",
    "EffectsStopped",
    "InMemoryEffectLedger",
    "InMemorySessionStore",
    "OwnershipLostError",
    "SessionStore",
    "StoreUnavailableError",
    "ToolApprovalRequest",
    "ToolApprovalResponse",
    "child_run_id",
    "create_approval_signer",
    "create_in_memory_session_store",
    "deserialize_checkpoint",
    "load_checkpoint",
    "resume_from_checkpoint",
    "resume_stream_from_checkpoint",
    "serialize_checkpoint",
]
