"""Runs, their legs and checkpoints, and the message history checkpoints point into."""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

__all__ = [
    "Checkpoint",
    "Effect",
    "EffectStopSwitch",
    "EffectTransition",
    "IdempotencyKey",
    "JournalEntry",
    "Leg",
    "NulSafeJSONField",
    "RUN_ID_VALIDATOR",
    "Run",
    "RunMessage",
    "Thread",
]

RUN_ID_VALIDATOR = RegexValidator(
    r"^[A-Za-z0-9._:-]{1,200}\Z", "A run id is 1-200 characters of letters, digits, '.', '_', ':' and '-'."
)


#: NulSafeJSONField's escape character (private use): U+E000 "0" stands for NUL, U+E000 U+E000 for itself.
_ESCAPE = "\ue000"
_ESCAPED = re.compile(f"{_ESCAPE}(.)", re.DOTALL)


def _nul_escaped(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(_ESCAPE, _ESCAPE * 2).replace("\x00", f"{_ESCAPE}0")
    if isinstance(value, dict):
        return {_nul_escaped(key): _nul_escaped(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_nul_escaped(item) for item in value]
    return value


def _nul_unescaped(value: Any) -> Any:
    if isinstance(value, str):
        return _ESCAPED.sub(lambda match: "\x00" if match[1] == "0" else match[1], value)
    if isinstance(value, dict):
        return {_nul_unescaped(key): _nul_unescaped(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_nul_unescaped(item) for item in value]
    return value


class NulSafeJSONField(models.JSONField):
    """A JSONField whose strings and keys may hold NUL, as any JSON may: PostgreSQL's jsonb refuses \\u0000, so a NUL
    is stored escaped and read back as given. A lookup's value is escaped alike, so key lookups still match."""

    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value(_nul_escaped(value))

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return _nul_unescaped(super().from_db_value(value, expression, connection))


def _empty_usage() -> dict:
    return {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}


class Thread(models.Model):
    """A conversation with one agent: a sequence of turns, each a Run (``Run.thread``, ``Run.turn``) whose history
    is the previous turn's final history plus one new user message (runs.services.threads)."""

    thread_id = models.CharField(max_length=200, unique=True, validators=[RUN_ID_VALIDATOR])
    agent = models.CharField(max_length=100, db_index=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="threads"
    )
    metadata = NulSafeJSONField(
        default=dict, blank=True, help_text="The client's own JSON object (at most 16 KB), returned as given.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True, help_text="When its last turn was added.")

    class Meta:
        ordering = ["-updated_at", "-id"]

    def __str__(self) -> str:
        return f"{self.thread_id} ({self.agent})"


class Run(models.Model):
    """One agent run: its agent, status, cumulative counters and the lease of the worker that owns it."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUSPENDED = "suspended", "Waiting for review"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        NEEDS_REVIEW = "needs_review", "Needs review"

    run_id = models.CharField(max_length=200, unique=True, validators=[RUN_ID_VALIDATOR])
    agent = models.CharField(max_length=100, db_index=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED, db_index=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    # The messages the run started from, as codec JSON (bytes-safe); later history lives in checkpoints.
    input_messages = models.TextField()
    step_index = models.IntegerField(default=-1, help_text="The last step a checkpoint closed; -1 before any.")
    usage = models.JSONField(default=_empty_usage, help_text="Cumulative over every leg.")
    finish_reason = models.CharField(max_length=30, blank=True)
    error = models.TextField(
        blank=True, help_text="Why the run failed, needs review, or waits for a retry (no secrets)."
    )
    # Retries of transient model errors (runs.agents.retries): the claim takes a queued run only once retry_at has come.
    retry_at = models.DateTimeField(
        null=True, blank=True, help_text="When the scheduled retry of a failed model call may start."
    )
    retry_attempt = models.PositiveIntegerField(
        default=0, help_text="Retries in a row of failed model calls; a successful step resets it to 0."
    )
    retry_limit = models.PositiveIntegerField(
        default=0, help_text="How many retries in a row the agent's policy allowed when the last one was scheduled."
    )
    # Ownership: a claim increments the epoch; writes are accepted only from the current epoch.
    owner_epoch = models.PositiveBigIntegerField(default=0)
    worker_id = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # A business operation another run opened and has not settled (runs.runtime.effects): this run waits on it, and
    # is queued again when it settles (runs.stores.ledger.effect_waiters_queue).
    waits_for_operation = models.CharField(
        max_length=500, blank=True, db_index=True,
        help_text="The operation id of another run's effect this run waits for (empty when it waits for none).",
    )
    cancel_requested = models.BooleanField(default=False)
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="Who cancelled the run (empty for a system or an unknown caller).",
    )
    cancelled_at = models.DateTimeField(null=True, blank=True)
    cancel_reason = models.CharField(
        max_length=2000, blank=True, help_text="Why the run was cancelled, as its canceller said (may be empty).",
    )
    metadata = NulSafeJSONField(
        default=dict, blank=True, help_text="The client's own JSON object (at most 16 KB), returned as given.",
    )
    # Retention (`runs prune`): when the run's journal, checkpoints and messages were removed, and its recovery
    # receipt as it stood then (JSON text), so `runs export` still answers.
    pruned_at = models.DateTimeField(null=True, blank=True)
    # Tracing (observability.tracing): the W3C traceparent of the run's trace, set when its first traced leg starts,
    # so every later leg, in whatever process, joins the same trace.
    trace_context = models.CharField(
        max_length=55, null=True, blank=True, help_text="W3C traceparent of the run's trace (empty untraced).",
    )
    pruned_receipt = models.TextField(blank=True)
    # Conversations: a run that is a turn of a thread, numbered from 1 (both empty outside a thread).
    thread = models.ForeignKey(
        Thread, null=True, blank=True, on_delete=models.PROTECT, related_name="turns",
        help_text="The thread this run is a turn of (empty outside a thread).",
    )
    turn = models.PositiveIntegerField(null=True, blank=True, help_text="Its turn in the thread: 1 for the first.")
    # Forks (runs.services.fork): a run started from a checkpoint of another run, whose history it starts from. The
    # step stays when the origin's row is deleted, so a fork's approvals still go to reviewers (approvals.roles).
    forked_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks",
        help_text="The run this one was forked from (empty for a run that is not a fork).",
    )
    forked_from_step = models.IntegerField(
        null=True, blank=True, help_text="The step of the origin's checkpoint it was forked from (empty: not a fork).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "lease_expires_at"], name="run_claimable")]
        # One run per turn of a thread, whatever two concurrent posts do (the service also locks the thread).
        constraints = [models.UniqueConstraint(fields=["thread", "turn"], name="run_thread_turn_unique")]
        # The roles of runs.access: support and reviewers read every run; nobody but a run's creator (and
        # superusers) cancels it unless granted cancel_every_run; reviewers resolve effects needing review.
        permissions = [
            ("view_every_run", "Can read every run, its timeline, checkpoints and receipt"),
            ("cancel_every_run", "Can cancel any user's run"),
            ("resolve_effect", "Can resolve an effect that needs review"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id} ({self.agent}, {self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in {self.Status.COMPLETED, self.Status.FAILED, self.Status.CANCELLED}

    @property
    def is_fork(self) -> bool:
        """Started from another run's checkpoint (its approvals go to reviewers, whatever its agent says)."""
        return self.forked_from_step is not None


class Leg(models.Model):
    """One execution of a run by one owner: the first leg, a verdict's leg, a recovery leg."""

    class Kind(models.TextChoices):
        START = "start", "Start"
        VERDICT = "verdict", "After a verdict"
        RECOVERY = "recovery", "Recovery"
        RETRY = "retry", "Retry after a model error"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="legs")
    number = models.PositiveIntegerField()
    kind = models.CharField(max_length=20, choices=Kind.choices)
    owner_epoch = models.PositiveBigIntegerField()
    worker_id = models.CharField(max_length=200)
    started_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    finish_reason = models.CharField(max_length=30, blank=True)
    usage = models.JSONField(default=_empty_usage)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["run", "number"]
        constraints = [models.UniqueConstraint(fields=["run", "number"], name="leg_number_unique")]

    def __str__(self) -> str:
        return f"{self.run.run_id} leg {self.number} (epoch {self.owner_epoch})"


#: Every index a table has is one more page each save writes (and fsyncs, on SQLite with synchronous FULL).
#: So the history's tables have one index each, led by the run (its foreign key's lookups and a run's delete
#: use it) then the session key (a load's); the links inside a history (a message's parent, a checkpoint's
#: head) are neither indexed nor constrained: only the session store writes them, each in the same
#: transaction as what it points to, and a run's messages and checkpoints are deleted together with it
#: (issue 8: 10.5 pages a save became 6.5, counted in SQLite's WAL).
_HISTORY_LINK = {"on_delete": models.DO_NOTHING, "db_constraint": False, "db_index": False, "related_name": "+"}


class RunMessage(models.Model):
    """One message of a history, stored once. Histories are chains: each message points at the one before,
    so a checkpoint writes only its new messages and still loads its full history."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="messages", db_index=False)
    session_key = models.CharField(max_length=400)
    parent = models.ForeignKey("self", null=True, blank=True, **_HISTORY_LINK)
    position = models.PositiveIntegerField()
    data = models.BinaryField(help_text="Codec JSON of the message, sealed when encryption keys are set.")

    class Meta:
        ordering = ["run_id", "session_key", "position", "id"]  # the column: "run" would order by Run's ordering
        indexes = [models.Index(fields=["run", "session_key"], name="message_history")]

    def __str__(self) -> str:
        return f"{self.session_key} message {self.position}"


class Checkpoint(models.Model):
    """Every AgentCheckpoint a run saved (time travel); the latest per session key is what resume loads."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="checkpoints", db_index=False)
    session_key = models.CharField(max_length=400, help_text="The runtime's run id: the run's, or a sub-agent's.")
    step_index = models.IntegerField()
    status = models.CharField(max_length=20)
    usage = models.JSONField(default=_empty_usage)
    agent_path = models.JSONField(default=list, blank=True)
    head = models.ForeignKey(RunMessage, null=True, blank=True, **_HISTORY_LINK)
    message_count = models.PositiveIntegerField()
    # Codec JSON of the pending approvals (they carry tool inputs), sealed like messages.
    pending_approvals = models.BinaryField(null=True, blank=True)
    created_at_ms = models.BigIntegerField(help_text="deps.clock.now() when the runtime saved it.")
    owner_epoch = models.PositiveBigIntegerField(help_text="The epoch of the worker that wrote it.")
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run_id", "id"]
        indexes = [models.Index(fields=["run", "session_key", "-id"], name="checkpoint_latest")]

    def __str__(self) -> str:
        return f"{self.session_key}#{self.step_index} ({self.status})"

    @property
    def step_id(self) -> str:
        return f"{self.session_key}#{self.step_index}"


class Effect(models.Model):
    """The effect ledger: one row per operation of an effectful tool, written before the tool is called.

    An operation is performed at most once: a committed one replays its receipt, one attempted without an
    outcome is reconciled with the outside system before anything is retried, an unknown one goes to a person,
    and a request that changed under the same id is refused. The rules are runs.runtime.effects'; this is the
    database ledger's row (runs.stores.ledger.DatabaseEffectLedger), each of its moves an EffectTransition.
    """

    class Status(models.TextChoices):
        PROPOSED = "proposed", "Proposed"
        APPROVED = "approved", "Approved"
        ATTEMPTED = "attempted", "Attempted"
        COMMITTED = "committed", "Committed"
        VERIFIED = "verified", "Verified"
        FAILED = "failed", "Failed"
        UNKNOWN = "unknown", "Outcome unknown"
        NEEDS_REVIEW = "needs_review", "Needs review"

    class Source(models.TextChoices):
        NONE = "", "Not known yet"
        TOOL = "tool", "The tool's answer"
        RECONCILIATION = "reconciliation", "Read back from the outside system"
        PERSON = "person", "A person's resolution"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="effects",
                            help_text="The run that opened the operation: the only one that attempts it.")
    operation_id = models.CharField(
        max_length=500, unique=True,
        help_text="Run id + tool call id, or tool name + business key (an operation every run shares).",
    )
    tool_call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200)
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of the canonical JSON of tool name and input.")
    request = models.JSONField(help_text="The tool's input.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PROPOSED, db_index=True)
    receipt = models.JSONField(null=True, blank=True, help_text="The outcome: the tool's output, read back, or given.")
    outcome_source = models.CharField(max_length=20, choices=Source.choices, blank=True, default=Source.NONE)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    approval = models.JSONField(
        null=True, blank=True, help_text="What authorized the attempt: approval id, revision and fingerprint, or a "
        "person's retry.",
    )
    owner_epoch = models.PositiveBigIntegerField(help_text="The epoch of the last worker that wrote it.")
    unknown_since = models.DateTimeField(null=True, blank=True, help_text="Since when its outcome is unknown.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["run", "id"]

    def __str__(self) -> str:
        return f"{self.tool_name} {self.operation_id} ({self.status})"

    @property
    def is_reconciled(self) -> bool:
        """Its outcome was read back from the outside system after a crash or a timeout."""
        return self.outcome_source == self.Source.RECONCILIATION


class EffectTransition(models.Model):
    """One move of an effect's state, or an event that kept it (a conflict, a reconciliation that found nothing,
    a stop): when, under which owner epoch, by whom (a worker or a person) and why."""

    class Actor(models.TextChoices):
        WORKER = "worker", "Worker"
        PERSON = "person", "Person"

    effect = models.ForeignKey(Effect, on_delete=models.CASCADE, related_name="transitions")
    from_status = models.CharField(max_length=20, blank=True)
    to_status = models.CharField(max_length=20, choices=Effect.Status.choices)
    owner_epoch = models.PositiveBigIntegerField()
    actor_kind = models.CharField(max_length=10, choices=Actor.choices)
    actor = models.CharField(max_length=200, help_text="The worker's id, or the person's username.")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    via = models.CharField(max_length=20, help_text="tool, approval, reconcile, verify, stop, conflict, or a "
                                                    "person's retry, commit, abandon.")
    note = models.TextField(blank=True, help_text="What happened, or the person's reason.")
    evidence = models.JSONField(null=True, blank=True, help_text="What was read (reconciliation) or given.")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["effect", "id"]

    def __str__(self) -> str:
        return f"{self.effect.operation_id}: {self.from_status or '-'} -> {self.to_status} ({self.via})"


class EffectStopSwitch(models.Model):
    """A stop switch (runs.services.stop_switch): while on, no new effect is attempted, for every agent (blank agent) or
    one. Reads, reconciliation and suspension go on; released, the runs it suspended continue."""

    agent = models.CharField(max_length=100, blank=True, unique=True, help_text="Blank: every agent.")
    is_on = models.BooleanField(default=True)
    reason = models.TextField(blank=True)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    changed_at = models.DateTimeField()

    class Meta:
        ordering = ["agent"]

    def __str__(self) -> str:
        return f"{'effects of ' + self.agent if self.agent else 'every effect'}: {'stopped' if self.is_on else 'on'}"


class JournalEntry(models.Model):
    """The resumable wire's journal: every stream part a run emitted, numbered gaplessly from 0 across its
    legs, and a sentinel row where each leg ended (its ``seq`` is the last part's before it, -1 when none)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="journal")
    seq = models.IntegerField()
    is_sentinel = models.BooleanField(default=False)
    # JSON text, not a JSON column: appends are the hot path, and the database never queries inside a part.
    part = models.TextField(blank=True, default="", help_text="Codec JSON of the stream part (empty on a sentinel).")
    owner_epoch = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "id"]
        verbose_name_plural = "journal entries"
        constraints = [
            models.UniqueConstraint(
                fields=["run", "seq"], condition=models.Q(is_sentinel=False), name="journal_part_seq_unique"
            )
        ]
        # Reads use the partial unique index (run, seq) of parts and the run index for sentinels: no other index,
        # since every index costs each append.

    def __str__(self) -> str:
        return f"{self.run.run_id} {'end of leg' if self.is_sentinel else f'#{self.seq}'}"

    @property
    def decoded_part(self) -> dict | None:
        """The stream part this row holds (None on a sentinel)."""
        if self.is_sentinel:
            return None
        from runs.runtime.codec import decode_value
        from runs.secrets.sealing import unseal_text

        return decode_value(json.loads(unseal_text(self.part)))


class IdempotencyKey(models.Model):
    """A client's ``Idempotency-Key`` on a POST, per user: the request's fingerprint and, once given, its answer,
    which a repeat of the request is answered with until ``expires_at`` (runs.services.idempotency)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    scope = models.CharField(max_length=100, help_text="The endpoint the key was first sent to, e.g. POST /api/runs/.")
    fingerprint = models.CharField(
        max_length=64, help_text="SHA-256 of the endpoint and the canonical JSON of the request's body."
    )
    status_code = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="The answer's status; empty while the first request is being answered."
    )
    # Text, not JSON: a replay is the first answer to the byte (jsonb would reorder its keys).
    answer = models.TextField(blank=True, help_text="The answer's body as JSON.")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True, help_text="When a repeat stops being answered from here.")

    class Meta:
        ordering = ["-created_at", "-id"]
        # Two concurrent first requests with one key: the second insert fails, and it is answered from the first.
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_unique")]

    def __str__(self) -> str:
        return f"{self.key} ({self.scope}, {self.status_code or 'in flight'})"
