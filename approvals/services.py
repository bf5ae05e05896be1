"""Writes for approvals: recording a run's requests, deciding them, expiring them, spending their tokens, and the
role groups with their permissions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractUser, Group, Permission
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from approvals.roles import REVIEWERS_GROUP, ROLE_PERMISSIONS, approval_refusal
from approvals.errors import ApprovalNotDecidable, ApprovalNotFound, ApprovalTokenInvalid
from approvals.signals import approval_decided, approval_requested, approval_requests_changed_on_commit
from approvals.models import ApprovalRequest
from approvals.selectors import approval_edit_problem, approval_state, approval_suspension_is_settled
from approvals.signing import approval_signer
from runs.models import Checkpoint, Run
from runs.runtime.approvals import sign_edit
from runs.runtime.stores import SavedCheckpoint
from runs.services.lifecycle import run_queue_after_verdicts

__all__ = [
    "approval_checkpoint_saved",
    "approval_decide",
    "approval_expire_due",
    "approval_requests_mark_used",
    "approval_requests_record",
    "approval_requests_withdraw",
    "reviewers_group_ensure",
    "role_group_ensure",
]


def role_group_ensure(name: str) -> Group:
    """The role's group with its permissions (migration approvals.0002 creates them; a reset database may not)."""
    group, _ = Group.objects.get_or_create(name=name)
    for code in ROLE_PERMISSIONS[name]:
        app_label, codename = code.split(".")
        group.permissions.add(Permission.objects.get(codename=codename, content_type__app_label=app_label))
    return group


def reviewers_group_ensure() -> Group:
    """The reviewers group with its permissions."""
    return role_group_ensure(REVIEWERS_GROUP)


def approval_checkpoint_saved(saved: SavedCheckpoint) -> None:
    """A leg's save hook, inside the fenced checkpoint save: a root suspension records its requests; the root
    checkpoint after a suspension has settled its verdicts, so their tokens are spent."""
    if not saved.is_root:
        return
    row: Checkpoint = saved.revision
    if row.status == "suspended":
        approval_requests_record(revision=row, requests=saved.checkpoint.get("pending_approvals") or [])
    elif saved.previous_status == "suspended":
        approval_requests_mark_used(after=row)


def approval_requests_withdraw(*, run: Run, user: AbstractUser | None = None, **kwargs: object) -> int:
    """The run was cancelled: its open requests close as "cancelled with the run" (a run_cancelled receiver)."""
    withdrawn = ApprovalRequest.objects.filter(run=run, status=ApprovalRequest.Status.PENDING).update(
        status=ApprovalRequest.Status.CANCELLED, decided_by=user, decided_at=timezone.now()
    )
    if withdrawn:
        approval_requests_changed_on_commit(run_pk=run.pk)
    return withdrawn


def approval_requests_record(*, revision: Checkpoint, requests: list[dict[str, Any]]) -> list[ApprovalRequest]:
    """Store a suspension's requests (inside the fenced checkpoint save); older pending ones are superseded."""
    run_pk = revision.run_id
    now = timezone.now()
    ApprovalRequest.objects.filter(run_id=run_pk, status=ApprovalRequest.Status.PENDING).exclude(revision=revision).update(
        status=ApprovalRequest.Status.SUPERSEDED, decided_at=now
    )
    max_age = timedelta(seconds=settings.DEUZ_APPROVAL_MAX_AGE_SECONDS)
    rows = []
    for request in requests:
        payload = approval_signer().verify(request.get("token"))
        issued_at = (
            datetime.fromtimestamp(payload["issued_at"] / 1000, tz=UTC)
            if payload and isinstance(payload.get("issued_at"), int)
            else now
        )
        rows.append(
            ApprovalRequest(
                run_id=run_pk,
                revision=revision,
                approval_id=request["approval_id"],
                tool_call_id=request["tool_call_id"],
                tool_name=request["tool_name"],
                tool_input=request.get("input") or {},
                agent_path=list(request.get("agent_path") or []),
                operation_id=str(request.get("operation_id") or "")[:500],
                token=request.get("token", ""),
                issued_at=issued_at,
                expires_at=issued_at + max_age,
            )
        )
    approval_requests_changed_on_commit(run_pk=run_pk)
    rows = ApprovalRequest.objects.bulk_create(rows)
    approval_requested.send(sender=ApprovalRequest, requests=rows)
    return rows


def approval_requests_mark_used(*, after: Checkpoint) -> int:
    """Every approval of the run's earlier suspensions was settled by checkpoint ``after`` or before: their tokens
    cannot be used again."""
    used = (
        ApprovalRequest.objects.filter(run_id=after.run_id, status=ApprovalRequest.Status.APPROVED)
        .exclude(revision=after)
        .update(status=ApprovalRequest.Status.USED)
    )
    if used:
        approval_requests_changed_on_commit(run_pk=after.run_id)
    return used


def approval_decide(
    *, run_id: str, approval_id: str, approved: bool, token: str, reason: str = "", user: AbstractUser | None,
    edited_input: dict[str, Any] | None = None,
) -> ApprovalRequest:
    """Record a verdict once, by a ``user`` who may decide it (approvals.roles; None for the system), else
    PermissionDenied. The token must verify for this request and run; the run is queued for its resume leg when
    every request of the suspended step has a verdict. An approval with ``edited_input`` (valid against the tool's
    schema, else ValidationError and nothing decided) records the edited request, signed by the server, as the
    approval's next revision: the only input the run will call the tool with."""
    if edited_input is not None and not approved:
        raise ValidationError({"edited_input": ["An edited input comes with an approval, not a denial."]})
    expired = False
    with transaction.atomic():
        request = _request_locked(run_id, approval_id)
        payload = approval_signer().verify(token)
        if (
            payload is None
            or payload.get("approval_id") != approval_id
            or payload.get("tool_call_id") != request.tool_call_id
            or payload.get("run_id") != run_id
        ):
            raise ApprovalTokenInvalid()
        run = request.run
        if user is not None and (refusal := approval_refusal(user=user, run=run)) is not None:
            raise PermissionDenied(refusal)
        if run.status == Run.Status.CANCELLED or run.cancel_requested:
            raise ApprovalNotDecidable("The run was cancelled; its requests cannot be decided.", status=request.status)
        if approval_state(request) == ApprovalRequest.Status.EXPIRED and request.status == ApprovalRequest.Status.PENDING:
            request.status = ApprovalRequest.Status.EXPIRED
            request.save(update_fields=["status"])
            _queue_when_settled(run, request.revision_id)
            approval_decided.send(sender=ApprovalRequest, request=request)
            expired = True
        elif request.status != ApprovalRequest.Status.PENDING:
            raise ApprovalNotDecidable(f"This request is {request.get_status_display().lower()}.", status=request.status)
        else:
            if edited_input is not None and edited_input != request.tool_input:
                _record_edit(request, edited_input, user=user)
            request.status = ApprovalRequest.Status.APPROVED if approved else ApprovalRequest.Status.DENIED
            request.decided_by = user
            request.decided_at = timezone.now()
            request.reason = reason
            request.full_clean()
            request.save()
            _queue_when_settled(run, request.revision_id)
            approval_decided.send(sender=ApprovalRequest, request=request)
        approval_requests_changed_on_commit(run_pk=run.pk)
    if expired:  # raised after commit, so the expiry itself is kept
        raise ApprovalNotDecidable("This request expired before it was decided.", status=ApprovalRequest.Status.EXPIRED)
    return request


def _record_edit(request: ApprovalRequest, edited_input: dict[str, Any], *, user: AbstractUser | None) -> None:
    """The edited request, checked against the tool's schema and signed by the server for the run (the verdict's
    token verified for the original first): the approval's next revision, made by whoever approves it."""
    problem = approval_edit_problem(request, edited_input)
    if problem is not None:
        raise ValidationError({"edited_input": [problem]})
    request.edited_input = edited_input
    request.edited_token = sign_edit(request.as_request(), edited_input=edited_input,
                                     edited_by=user.get_username() if user is not None else None,
                                     signer=approval_signer(), run_id=request.run.run_id)


def _request_locked(run_id: str, approval_id: str) -> ApprovalRequest:
    try:
        return (
            ApprovalRequest.objects.select_for_update()
            .select_related("run")
            .get(run__run_id=run_id, approval_id=approval_id)
        )
    except ApprovalRequest.DoesNotExist:
        raise ApprovalNotFound(run_id, approval_id) from None


def _queue_when_settled(run: Run, revision_id: int) -> None:
    """Queue the run's resume leg once no request of the suspended step is pending."""
    if approval_suspension_is_settled(run=run, revision_id=revision_id):
        run_queue_after_verdicts(run_pk=run.pk)


def approval_expire_due() -> int:
    """Expire pending requests past their life; their runs resume with denials. Returns how many expired."""
    count = 0
    due = ApprovalRequest.objects.filter(status=ApprovalRequest.Status.PENDING, expires_at__lte=timezone.now())
    for request in due.select_related("run")[:500]:
        with transaction.atomic():
            if ApprovalRequest.objects.filter(pk=request.pk, status=ApprovalRequest.Status.PENDING).update(
                status=ApprovalRequest.Status.EXPIRED
            ):
                count += 1
                _queue_when_settled(request.run, request.revision_id)
                request.status = ApprovalRequest.Status.EXPIRED
                approval_decided.send(sender=ApprovalRequest, request=request)
                approval_requests_changed_on_commit(run_pk=request.run_id)
    return count
