"""Errors raised by the pure runtime.

RunError
  CheckpointNotFoundError
  StoreUnavailableError
  CheckpointCorruptError
  OwnershipLostError
  RunHalted
  ScriptExhaustedError
"""

from __future__ import annotations

__all__ = [
    "CheckpointCorruptError",
    "CheckpointNotFoundError",
    "OwnershipLostError",
    "RunError",
    "RunHalted",
    "ScriptExhaustedError",
    "StoreUnavailableError",
]


class RunError(Exception):
    """Base for everything runs.runtime raises."""


class CheckpointNotFoundError(RunError):
    """The store answered, and it holds no checkpoint for this run."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"No checkpoint stored for run {run_id!r}.")
        self.run_id = run_id


class StoreUnavailableError(RunError):
    """The store could not be asked; distinct from a missing run, so a run is never restarted from scratch."""

    def __init__(self, run_id: str, cause: BaseException) -> None:
        super().__init__(f"The session store could not load run {run_id!r}: {type(cause).__name__}.")
        self.run_id = run_id


class CheckpointCorruptError(RunError):
    """Stored bytes failed to decode or carry an unknown schema version; never silently restart."""


class OwnershipLostError(RunError):
    """A store rejected a write because another worker owns the run now; the leg must stop at once."""


class RunHalted(RunError):
    """A tool stops the leg for people to look (an effect whose outcome cannot be established); not an
    ordinary tool error the model could react to. The last checkpoint stays, so the run can resume later."""


class ScriptExhaustedError(RunError):
    """A ScriptedModel was called more times than it has responses."""
