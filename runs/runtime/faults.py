"""Named crash points: where a fault probe (``deps.fault``) is called, so crash tests can kill a process there.

Points are constants, not strings typed at each call site, so a misspelt point fails at import, not silently.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["FaultPoint"]


class FaultPoint(StrEnum):
    """Every point a probe can be asked about (SERVICE.md, fault injection)."""

    AFTER_MODEL_DECISION = "after-model-decision"  # assistant message with tool calls checkpointed, no tool started
    BEFORE_EFFECT = "before-effect"  # effect intent recorded, tool not called
    AFTER_EFFECT_COMMIT = "after-effect-commit"  # the tool returned success, its result not yet recorded
    AFTER_EFFECT_RECORD = "after-effect-record"
    BEFORE_STEP_CHECKPOINT = "before-step-checkpoint"
    AFTER_STEP_CHECKPOINT = "after-step-checkpoint"
    MID_STREAM = "mid-stream"  # after some text deltas of a step
    AFTER_SUSPEND = "after-suspend"  # approval requests stored, run suspended
    BEFORE_OUTBOX_DELIVERY = "before-outbox-delivery"  # outbox messages (webhooks) are due, none claimed yet
