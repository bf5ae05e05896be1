"""Reads for approvals: every question about approval requests has its one answer here.

A request's *state* is its stored status as of now: a pending request past its expiry is expired (it
authorizes nothing, even before the expiry sweep marks it), and only a pending, unexpired request of a run
that was not cancelled is open for a verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from approvals.errors import ApprovalNotFound
from approvals.models import ApprovalRequest
from runs.agents import agent_build
from runs.errors import SealedDataError
from runs.models import Checkpoint, Effect, Run
from runs.runtime import Tool
from runs.selectors import run_latest_checkpoint_row

__all__ = [
    "OperationContext",
    "approval_edit_problem",
    "approval_get",
    "approval_is_open",
    "approval_latest_verdict",
    "approval_operation",
    "approval_pending_list",
    "approval_queue_list",
    "approval_queue_tool_names",
    "approval_recent_list",
    "approval_run_list",
    "approval_state",
    "approval_suspension_is_settled",
    "approval_suspension_pending_list",
    "approval_verdict",
    "approval_verdicts_for_resume",
]

Status = ApprovalRequest.Status


def approval_state(request: ApprovalRequest, *, now: datetime | None = None) -> str:
    """The request's status as of ``now`` (a pending one past its expiry is expired)."""
    if request.status == Status.PENDING and request.expires_at <= (now or timezone.now()):
        return Status.EXPIRED
    return request.status


#: A request's state as the verdict it came to (SERVICE.md): a used approval was an approval; a pending request or
#: one cancelled with its run has none.
_VERDICTS = {Status.APPROVED: "approved", Status.USED: "approved", Status.DENIED: "denied", Status.EXPIRED: "expired",
             Status.SUPERSEDED: "superseded"}


def approval_verdict(request: ApprovalRequest, *, now: datetime | None = None) -> str | None:
    """The verdict ``request`` came to as of ``now``: approved, denied, expired, superseded, or None (none yet)."""
    return _VERDICTS.get(approval_state(request, now=now))


def approval_is_open(request: ApprovalRequest, *, now: datetime | None = None) -> bool:
    """True when a verdict on ``request`` can still be recorded."""
    return approval_state(request, now=now) == Status.PENDING and not request.run.cancel_requested


def approval_get(*, run_id: str, approval_id: str) -> ApprovalRequest:
    try:
        return ApprovalRequest.objects.select_related("run", "run__created_by", "revision", "decided_by").get(
            run__run_id=run_id, approval_id=approval_id
        )
    except ApprovalRequest.DoesNotExist:
        raise ApprovalNotFound(run_id, approval_id) from None


def _open(now: datetime) -> QuerySet[ApprovalRequest]:
    return ApprovalRequest.objects.filter(status=Status.PENDING, expires_at__gt=now, run__cancel_requested=False)


def approval_queue_list(
    *, now: datetime | None = None, agent: str | None = None, tool: str | None = None,
    waiting_at_least: timedelta | None = None, expiring_within: timedelta | None = None,
) -> QuerySet[ApprovalRequest]:
    """The reviewers' queue: requests open for a verdict, newest first; narrowed to a run's ``agent``, a ``tool``,
    requests waiting ``waiting_at_least``, or those expiring within ``expiring_within`` (then soonest first)."""
    now = now or timezone.now()
    rows = _open(now).select_related("run", "run__created_by", "decided_by")
    if agent:
        rows = rows.filter(run__agent=agent)
    if tool:
        rows = rows.filter(tool_name=tool)
    if waiting_at_least is not None:
        rows = rows.filter(issued_at__lte=now - waiting_at_least)
    if expiring_within is not None:
        return rows.filter(expires_at__lte=now + expiring_within).order_by("expires_at", "id")
    return rows.order_by("-issued_at", "-id")


def approval_queue_tool_names(*, now: datetime | None = None) -> list[str]:
    """The tools the open requests call, by name (the console's tool filter suggests them)."""
    return list(_open(now or timezone.now()).order_by("tool_name").values_list("tool_name", flat=True).distinct())


def approval_recent_list(*, now: datetime | None = None, limit: int = 20) -> list[ApprovalRequest]:
    """The requests most recently closed (decided, expired, superseded, used, cancelled), newest first."""
    now = now or timezone.now()
    rows = ApprovalRequest.objects.select_related("run", "decided_by").order_by("-issued_at", "-id")
    return list(rows.exclude(pk__in=_open(now).values("pk"))[:limit])


def approval_pending_list(*, run: Run, now: datetime | None = None) -> list[ApprovalRequest]:
    """The requests ``run`` waits on now, oldest first."""
    return list(_open(now or timezone.now()).filter(run=run).order_by("id"))


def approval_run_list(*, run: Run) -> list[ApprovalRequest]:
    """Every request the run made, oldest first (its timeline and receipt)."""
    return list(ApprovalRequest.objects.filter(run=run).select_related("revision", "decided_by").order_by("id"))


def approval_latest_verdict(*, run: Run) -> ApprovalRequest | None:
    return ApprovalRequest.objects.filter(run=run, decided_at__isnull=False).order_by("-decided_at").first()


def _latest_suspension(run: Run) -> Checkpoint | None:
    """The run's latest root checkpoint when it is a suspension."""
    latest = run_latest_checkpoint_row(run=run)
    return latest if latest is not None and latest.status == "suspended" else None


def approval_suspension_pending_list(*, run: Run) -> list[dict[str, Any]]:
    """The ToolApprovalRequest dicts (with tokens) the run's latest suspension still waits on, for the leg that
    must say again what the run waits on; empty when its latest checkpoint is not a suspension."""
    latest = _latest_suspension(run)
    if latest is None:
        return []
    pending = ApprovalRequest.objects.filter(revision=latest, status=Status.PENDING).order_by("id")
    return [request.as_request() for request in pending]


def approval_suspension_is_settled(*, run: Run, revision_id: int | None = None) -> bool:
    """True when the suspension ``revision_id`` (default: the run's latest) has no request still pending."""
    if revision_id is None:
        latest = _latest_suspension(run)
        if latest is None:
            return False
        revision_id = latest.pk
    return not ApprovalRequest.objects.filter(revision_id=revision_id, status=Status.PENDING).exists()


def approval_verdicts_for_resume(*, run: Run) -> list[dict[str, Any]]:
    """The verdicts of the run's latest suspension, with their tokens, for resume_from_checkpoint to check again,
    and who gave each (a username, for the stream's tool-approval-verdict part). Expired, superseded and cancelled
    requests give none: the runtime denies them by default, decided by nobody."""
    latest = Checkpoint.objects.filter(run=run, session_key=run.run_id, status="suspended").order_by("-id").first()
    if latest is None:
        return []
    decided = ApprovalRequest.objects.filter(
        revision=latest, status__in=[Status.APPROVED, Status.DENIED, Status.USED]
    ).select_related("decided_by").order_by("id")
    verdicts = []
    for request in decided:
        verdict = {
            "approval_id": request.approval_id,
            "approved": request.status != Status.DENIED,
            "token": request.token,
            "decided_by": request.decided_by.get_username() if request.decided_by else None,
        }
        if request.reason:
            verdict["reason"] = request.reason
        if request.edited_token and request.status != Status.DENIED:
            verdict["edit_token"] = request.edited_token  # the runtime runs only the input the server signed
        verdicts.append(verdict)
    return verdicts


def approval_edit_problem(request: ApprovalRequest, edited_input: Any) -> str | None:
    """Why ``edited_input`` cannot replace the input of ``request``'s call, or None when it can: it must be a JSON
    object valid against the tool's input_schema (jsonschema), for a tool of the run's agent itself."""
    if not isinstance(edited_input, dict):
        return "The edited input must be a JSON object."
    if (problem := _edit_shape_problem(edited_input, request.tool_input)) is not None:
        return problem
    if request.agent_path:
        return "A sub-agent's call cannot be edited here; approve or deny it as asked."
    try:
        tool = agent_build(request.run.agent).tools.get(request.tool_name)
    except Exception:  # an agent that no longer builds: its schema is unknown, so no edit is accepted
        tool = None
    if not isinstance(tool, Tool):
        return f"The input schema of {request.tool_name} is not known here, so its input cannot be edited."
    return tool.input_problem(edited_input)


#: How deep an edited input may nest (as the API's bodies: runs.api.parsers.MAX_JSON_DEPTH).
MAX_EDIT_DEPTH = 32
#: How big an edited input may be as compact JSON (UTF-8), or twice the agent's own input when that is bigger:
#: a person's correction of a call, signed into a token and stored with the request and the ledger's entry.
MAX_EDIT_BYTES = 64 * 1024


def _edit_shape_problem(edited_input: dict[str, Any], original: Any) -> str | None:
    """Why ``edited_input`` cannot be stored and signed whatever the tool's schema says (too deep, too big, a NUL
    character or a lone surrogate, NaN or Infinity), or None. Walked without recursion: its depth is not known."""
    pending: list[tuple[Any, int]] = [(edited_input, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_EDIT_DEPTH:
                return f"The edited input is nested deeper than {MAX_EDIT_DEPTH} levels."
            items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
            pending.extend((item, depth + 1) for item in items)
        elif isinstance(value, str) and "\x00" in value:
            return "The edited input holds a NUL character (\\u0000), which cannot be stored."
    try:
        size = len(json.dumps(edited_input, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode())
    except (ValueError, UnicodeEncodeError):  # NaN or Infinity; a lone surrogate
        return "The edited input holds NaN, Infinity or a lone surrogate escape, which JSON cannot carry."
    try:
        limit = max(MAX_EDIT_BYTES, 2 * len(json.dumps(original, separators=(",", ":")).encode()))
    except (TypeError, ValueError):
        limit = MAX_EDIT_BYTES
    if size > limit:
        return f"The edited input is {size} bytes as compact JSON; it may be at most {limit}."
    return None


@dataclass(frozen=True)
class OperationContext:
    """What a reviewer must know of the business operation a request would perform, before deciding it: the
    ledger's entry when some run opened it already (performed, under way, or needing review), and the requests
    of other runs that ask for the same operation and still wait."""

    operation_id: str
    effect: Effect | None
    others_pending: list[ApprovalRequest]
    is_conflict: bool = False

    @property
    def opened_elsewhere(self) -> bool:
        return self.effect is not None

    @property
    def is_performed(self) -> bool:
        return self.effect is not None and self.effect.status in (Effect.Status.COMMITTED, Effect.Status.VERIFIED)


def approval_operation(request: ApprovalRequest, *, now: datetime | None = None) -> OperationContext | None:
    """The business operation ``request`` names, as it stands now; None for a call of a tool without one."""
    if not request.operation_id:
        return None
    effect = (Effect.objects.filter(operation_id=request.operation_id).exclude(run_id=request.run_id)
              .select_related("run").first())
    others = list(_open(now or timezone.now()).filter(operation_id=request.operation_id)
                  .exclude(run_id=request.run_id).select_related("run").order_by("issued_at", "id")[:10])
    return OperationContext(request.operation_id, effect, others,
                            is_conflict=effect is not None and _is_conflict(request, effect))


def _is_conflict(request: ApprovalRequest, effect: Effect) -> bool:
    """Whether the ledger would refuse ``request`` as another request under the same operation: its fingerprint is
    not the entry's. The fingerprint is the tool's (its ``Effect(fingerprint=...)`` picks what counts, so an input
    that differs only where it does not count is no conflict); for a tool this server cannot build here (a
    sub-agent's, an MCP server's), the whole input is compared. An input sealed with a key this server lacks is
    not judged."""
    try:
        asked = request.tool_input
    except SealedDataError:
        return False
    fingerprint = _fingerprint(request, asked)
    return effect.fingerprint != fingerprint if fingerprint is not None else effect.request != asked


def _fingerprint(request: ApprovalRequest, tool_input: Any) -> str | None:
    """The ledger's fingerprint of ``tool_input`` for the tool ``request`` calls, when it is a tool of the run's
    agent itself; None otherwise."""
    if request.agent_path:
        return None
    try:
        tool = agent_build(request.run.agent).tools.get(request.tool_name)
        return tool.fingerprint_of(request.tool_name, tool_input) if isinstance(tool, Tool) else None
    except Exception:  # an agent that no longer builds: the page still shows, with the plain comparison
        return None
