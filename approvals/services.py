"""Writes for approvals: recording a run's requests, deciding them, expiring them, spending their tokens."""

from __future__ import annotations

import os
import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser, Group, Permission
from django.db import transaction
from django.utils import timezone

from approvals.errors import ApprovalNotDecidable, ApprovalNotFound, ApprovalTokenInvalid
from approvals.models import ApprovalRequest
from runs.models import Checkpoint, Run
from runs.notify import runs_notify
from runs.runtime.durable import create_approval_signer

__all__ = [
    "DEMO_REVIEWER_USERNAME",
    "REVIEWERS_GROUP",
    "approval_decide",
    "approval_expire_due",
    "approval_requests_mark_used",
    "approval_requests_record",
    "approval_verdicts_for_resume",
    "demo_reviewer_ensure",
    "reviewers_group_ensure",
]

REVIEWERS_GROUP = "reviewers"
DEMO_REVIEWER_USERNAME = "reviewer"


def _demo_password_load_or_create(password_file: Path) -> str:
    """The password stored in ``password_file``, minted on first use (owner-only file)."""
    try:
        password = password_file.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        password = ""
    if password:
        return password
    password = secrets.token_urlsafe(12)
    # 0o600: the file holds a working login; other local users must not read it.
    fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as stream:
        stream.write(password + "\n")
    return password


@transaction.atomic
def demo_reviewer_ensure(*, password_file: Path) -> tuple[AbstractUser, str]:
    """Make the demo reviewer exist, staff, in the reviewers group, with the stored password.

    The password lives in a file rather than the database so it survives a
    database reset and stays the same across restarts of `manage.py serve`.
    """
    password = _demo_password_load_or_create(password_file)
    user, _ = get_user_model().objects.get_or_create(username=DEMO_REVIEWER_USERNAME)
    user.is_staff = True
    user.is_active = True
    if not user.check_password(password):
        user.set_password(password)
    user.full_clean()
    user.save()
    user.groups.add(reviewers_group_ensure())
    return user, password


def reviewers_group_ensure() -> Group:
    """The reviewers group, holding the permission to decide approval requests."""
    group, _ = Group.objects.get_or_create(name=REVIEWERS_GROUP)
    permission = Permission.objects.get(codename="decide_approvalrequest", content_type__app_label="approvals")
    group.permissions.add(permission)
    return group


def _signer():
    return create_approval_signer(secret=settings.DEUZ_APPROVAL_SECRET)


def approval_requests_record(*, run: Run, revision: Checkpoint, requests: list[dict[str, Any]]) -> list[ApprovalRequest]:
    """Store a suspension's requests (inside the fenced checkpoint save); older pending ones are superseded."""
    ApprovalRequest.objects.filter(run=run, status=ApprovalRequest.Status.PENDING).exclude(revision=revision).update(
        status=ApprovalRequest.Status.SUPERSEDED
    )
    now = timezone.now()
    max_age = timedelta(seconds=settings.DEUZ_APPROVAL_MAX_AGE_SECONDS)
    rows = []
    for request in requests:
        payload = _signer().verify(request.get("token"))
        issued_at = (
            datetime.fromtimestamp(payload["issued_at"] / 1000, tz=UTC)
            if payload and isinstance(payload.get("issued_at"), int)
            else now
        )
        rows.append(
            ApprovalRequest(
                run=run,
                revision=revision,
                approval_id=request["approval_id"],
                tool_call_id=request["tool_call_id"],
                tool_name=request["tool_name"],
                tool_input=request.get("input") or {},
                agent_path=list(request.get("agent_path") or []),
                token=request.get("token", ""),
                issued_at=issued_at,
                expires_at=issued_at + max_age,
            )
        )
    return ApprovalRequest.objects.bulk_create(rows)


def approval_requests_mark_used(*, run: Run, revision: Checkpoint) -> int:
    """The approvals of ``revision`` were settled into a later checkpoint: their tokens cannot be used again."""
    return ApprovalRequest.objects.filter(run=run, revision=revision, status=ApprovalRequest.Status.APPROVED).update(
        status=ApprovalRequest.Status.USED
    )


def approval_decide(
    *, run_id: str, approval_id: str, approved: bool, token: str, reason: str = "", user: AbstractUser | None
) -> ApprovalRequest:
    """Record a reviewer's verdict once. The token must verify for this request and run; the run is queued
    for its resume leg when every request of the suspended step has a verdict."""
    expired = False
    with transaction.atomic():
        request = _request_locked(run_id, approval_id)
        payload = _signer().verify(token)
        if (
            payload is None
            or payload.get("approval_id") != approval_id
            or payload.get("tool_call_id") != request.tool_call_id
            or payload.get("run_id") != run_id
        ):
            raise ApprovalTokenInvalid()
        run = request.run
        if run.status == Run.Status.CANCELLED or run.cancel_requested:
            raise ApprovalNotDecidable("The run was cancelled; its requests cannot be decided.", status=request.status)
        if request.status == ApprovalRequest.Status.PENDING and request.expires_at <= timezone.now():
            request.status = ApprovalRequest.Status.EXPIRED
            request.save(update_fields=["status"])
            _queue_when_settled(run, request.revision_id)
            expired = True
        elif request.status != ApprovalRequest.Status.PENDING:
            raise ApprovalNotDecidable(f"This request is {request.get_status_display().lower()}.", status=request.status)
        else:
            request.status = ApprovalRequest.Status.APPROVED if approved else ApprovalRequest.Status.DENIED
            request.decided_by = user
            request.decided_at = timezone.now()
            request.reason = reason
            request.full_clean()
            request.save()
            _queue_when_settled(run, request.revision_id)
    if expired:  # raised after commit, so the expiry itself is kept
        raise ApprovalNotDecidable("This request expired before it was decided.", status=ApprovalRequest.Status.EXPIRED)
    return request


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
    if ApprovalRequest.objects.filter(revision_id=revision_id, status=ApprovalRequest.Status.PENDING).exists():
        return
    if Run.objects.filter(pk=run.pk, status=Run.Status.SUSPENDED, cancel_requested=False).update(
        status=Run.Status.QUEUED, updated_at=timezone.now()
    ):
        transaction.on_commit(runs_notify)


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
    return count


def approval_verdicts_for_resume(*, run: Run) -> list[dict[str, Any]]:
    """The verdicts of the run's latest suspension, with their tokens, for resume_from_checkpoint to check again.
    Expired and superseded requests give none: the runtime denies them by default."""
    latest = Checkpoint.objects.filter(run=run, session_key=run.run_id, status="suspended").order_by("-id").first()
    if latest is None:
        return []
    decided = ApprovalRequest.objects.filter(
        revision=latest,
        status__in=[ApprovalRequest.Status.APPROVED, ApprovalRequest.Status.DENIED, ApprovalRequest.Status.USED],
    )
    verdicts = []
    for request in decided:
        verdict = {
            "approval_id": request.approval_id,
            "approved": request.status != ApprovalRequest.Status.DENIED,
            "token": request.token,
        }
        if request.reason:
            verdict["reason"] = request.reason
        verdicts.append(verdict)
    return verdicts
