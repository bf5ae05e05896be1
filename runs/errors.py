"""Errors of the runs service.

ServiceError
  RunNotFound
    EffectNotFound
    CheckpointNotFound
  RunAlreadyExists
  UnknownAgent
  RunNotResumable
    EffectNotResolvable
  ThreadNotFound
  ThreadAlreadyExists
  ThreadTurnActive
  ThreadAgentMismatch
  IdempotencyKeyError
    IdempotencyKeyInvalid
    IdempotencyKeyReused
    IdempotencyKeyInFlight
StaleOwnerError (runs.runtime.OwnershipLostError)
SealedDataError (runs.runtime.CheckpointCorruptError)
"""

from __future__ import annotations

from runs.runtime.exceptions import CheckpointCorruptError, OwnershipLostError

__all__ = [
    "CheckpointNotFound",
    "EffectNotFound",
    "EffectNotResolvable",
    "IdempotencyKeyError",
    "IdempotencyKeyInFlight",
    "IdempotencyKeyInvalid",
    "IdempotencyKeyReused",
    "RunAlreadyExists",
    "RunNotFound",
    "RunNotResumable",
    "SealedDataError",
    "ServiceError",
    "StaleOwnerError",
    "ThreadAgentMismatch",
    "ThreadAlreadyExists",
    "ThreadNotFound",
    "ThreadTurnActive",
    "UnknownAgent",
]


class ServiceError(Exception):
    """Base for errors a caller of the runs services can act on."""


class RunNotFound(ServiceError):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"No run {run_id!r}.")
        self.run_id = run_id


class RunAlreadyExists(ServiceError):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"A run {run_id!r} exists already.")
        self.run_id = run_id


class UnknownAgent(ServiceError):
    def __init__(self, name: str) -> None:
        super().__init__(f"No agent named {name!r} is registered.")
        self.name = name


class RunNotResumable(ServiceError):
    """The run is in a state where the asked transition makes no sense (cancelled, completed...)."""


class StaleOwnerError(OwnershipLostError):
    """A write came from an owner epoch older than the run's: another worker owns the run now."""

    def __init__(self, run_id: str, epoch: int | None) -> None:
        super().__init__(f"Run {run_id!r} is no longer owned by epoch {epoch}; the write was rejected.")
        self.run_id = run_id
        self.epoch = epoch


class SealedDataError(CheckpointCorruptError):
    """Stored data cannot be unsealed: no key, or none of the keys opens it. Never an empty history."""


class EffectNotFound(RunNotFound):
    """No effect with this operation id in the run (an API 404)."""

    def __init__(self, run_id: str, operation_id: str) -> None:
        ServiceError.__init__(self, f"No effect {operation_id!r} in run {run_id!r}.")
        self.run_id = run_id
        self.operation_id = operation_id


class CheckpointNotFound(RunNotFound):
    """The run has no checkpoint of this step (an API 404, as for an unknown run)."""

    def __init__(self, run_id: str, step_index: int | str) -> None:
        ServiceError.__init__(self, f"Run {run_id!r} has no checkpoint of step {step_index!r}.")
        self.run_id = run_id
        self.step_index = step_index


class EffectNotResolvable(RunNotResumable):
    """The effect does not need review (or its run is being worked on), so there is nothing to resolve (409)."""


class IdempotencyKeyError(ServiceError):
    """An ``Idempotency-Key`` that cannot be honoured; the request was not answered (runs.services.idempotency)."""


class IdempotencyKeyInvalid(IdempotencyKeyError):
    """Not a key this service keeps: empty, too long, or not visible ASCII (400, naming the header)."""


class IdempotencyKeyReused(IdempotencyKeyError):
    """The key was sent before with another request body, or to another endpoint (422)."""


class IdempotencyKeyInFlight(IdempotencyKeyError):
    """The first request with this key is still being answered (409); repeat it later for its answer."""


class ThreadNotFound(ServiceError):
    def __init__(self, thread_id: str) -> None:
        super().__init__(f"No thread {thread_id!r}.")
        self.thread_id = thread_id


class ThreadAlreadyExists(ServiceError):
    def __init__(self, thread_id: str) -> None:
        super().__init__(f"A thread {thread_id!r} exists already.")
        self.thread_id = thread_id


class ThreadTurnActive(ServiceError):
    """A thread takes a new message only once its last turn has ended (completed, failed or cancelled) (409)."""

    def __init__(self, thread_id: str, active_run_id: str, status: str) -> None:
        super().__init__(
            f"Thread {thread_id!r} has a turn in progress ({active_run_id!r} is {status}); send the next message "
            "when it has ended."
        )
        self.thread_id = thread_id
        self.active_run_id = active_run_id
        self.status = status


class ThreadAgentMismatch(ServiceError):
    """A chat names another agent than its thread's: a thread talks to one agent (409)."""

    def __init__(self, thread_id: str, agent: str) -> None:
        super().__init__(f"Thread {thread_id!r} talks to the agent {agent!r}; start another chat for another agent.")
        self.thread_id = thread_id
        self.agent = agent
