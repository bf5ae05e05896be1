"""Writes for approvals: recording a run's requests, deciding them, expiring them, spending their tokens."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser, Group, Permission
from django.db import transaction
from django.utils import timezone

from approvals.roles import REVIEWERS_GROUP, ROLE_PERMISSIONS, SUPPORT_GROUP
from approvals.errors import ApprovalNotDecidable, ApprovalNotFound, ApprovalTokenInvalid
from approvals.signals import approvals_changed_on_commit
from approvals.models import ApprovalRequest
from approvals.selectors import approval_state, approval_suspension_is_settled
from approvals.signing import approval_signer
from runs.models import Checkpoint, Run
from runs.runtime.stores import SavedCheckpoint
from runs.services.lifecycle import run_queue_after_verdicts

__all__ = [
    "DEMO_ROLES",
    "DemoLogin",
    "DemoRole",
    "approval_checkpoint_saved",
    "approval_decide",
    "approval_expire_due",
    "approval_requests_mark_used",
    "approval_requests_record",
    "approval_requests_withdraw",
    "demo_users_ensure",
    "reviewers_group_ensure",
    "role_group_ensure",
]


@dataclass(frozen=True)
class DemoRole:
    """One demo account of `manage.py serve` in DEBUG: its username, role, groups, and where its work is."""

    username: str
    role: str
    groups: tuple[str, ...] = ()
    is_staff: bool = False
    is_superuser: bool = False
    goes_to: str = "/runs/"
    does: str = ""


#: One demo user per role, in the order `manage.py serve` prints them.
DEMO_ROLES = (
    DemoRole("api-user", "plain API user", goes_to="/runs/",
             does="starts runs through the API and reads, follows and cancels its own"),
    DemoRole("support", "support", groups=(SUPPORT_GROUP,), is_staff=True, goes_to="/runs/",
             does="reads every run and its timeline (and the admin's records); decides nothing"),
    DemoRole("reviewer", "reviewer", groups=(REVIEWERS_GROUP,), is_staff=True, goes_to="/console/",
             does="approves or denies the requests runs wait on"),
    DemoRole("admin", "superuser", is_staff=True, is_superuser=True, goes_to="/admin/", does="may do everything"),
)


@dataclass(frozen=True)
class DemoLogin:
    """A demo account as created: the user, its password, and its role."""

    user: AbstractUser
    password: str
    role: DemoRole


def _demo_passwords_load_or_create(password_file: Path, usernames: list[str]) -> dict[str, str]:
    """The passwords stored in ``password_file`` (one "username password" a line), minted for names missing."""
    try:
        lines = password_file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = []
    passwords = dict(line.split(None, 1) for line in lines if len(line.split(None, 1)) == 2)
    passwords = {name: password.strip() for name, password in passwords.items()}
    if all(passwords.get(name) for name in usernames):
        return passwords
    for name in usernames:
        passwords[name] = passwords.get(name) or secrets.token_urlsafe(12)
    # 0o600: the file holds working logins; other local users must not read it.
    fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as stream:
        stream.writelines(f"{name} {password}\n" for name, password in passwords.items())
    return passwords


@transaction.atomic
def demo_users_ensure(*, password_file: Path) -> list[DemoLogin]:
    """Make one demo user per role (DEMO_ROLES) exist with its groups, flags and stored password.

    Passwords live in a file rather than the database so they survive a database reset and stay the same
    across restarts of `manage.py serve`; a password changed in the database is set back.
    """
    passwords = _demo_passwords_load_or_create(password_file, [role.username for role in DEMO_ROLES])
    logins = []
    for role in DEMO_ROLES:
        user, _ = get_user_model().objects.get_or_create(username=role.username)
        user.is_staff, user.is_superuser, user.is_active = role.is_staff, role.is_superuser, True
        password = passwords[role.username]
        if not user.check_password(password):
            user.set_password(password)
        user.full_clean()
        user.save()
        user.groups.set([role_group_ensure(name) for name in role.groups])
        logins.append(DemoLogin(user=user, password=password, role=role))
    return logins


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
        approvals_changed_on_commit(run_pk=run.pk)
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
                token=request.get("token", ""),
                issued_at=issued_at,
                expires_at=issued_at + max_age,
            )
        )
    approvals_changed_on_commit(run_pk=run_pk)
    return ApprovalRequest.objects.bulk_create(rows)


def approval_requests_mark_used(*, after: Checkpoint) -> int:
    """Every approval of the run's earlier suspensions was settled by checkpoint ``after`` or before: their tokens
    cannot be used again."""
    used = (
        ApprovalRequest.objects.filter(run_id=after.run_id, status=ApprovalRequest.Status.APPROVED)
        .exclude(revision=after)
        .update(status=ApprovalRequest.Status.USED)
    )
    if used:
        approvals_changed_on_commit(run_pk=after.run_id)
    return used


def approval_decide(
    *, run_id: str, approval_id: str, approved: bool, token: str, reason: str = "", user: AbstractUser | None
) -> ApprovalRequest:
    """Record a reviewer's verdict once. The token must verify for this request and run; the run is queued
    for its resume leg when every request of the suspended step has a verdict."""
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
        if run.status == Run.Status.CANCELLED or run.cancel_requested:
            raise ApprovalNotDecidable("The run was cancelled; its requests cannot be decided.", status=request.status)
        if approval_state(request) == ApprovalRequest.Status.EXPIRED and request.status == ApprovalRequest.Status.PENDING:
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
        approvals_changed_on_commit(run_pk=run.pk)
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
                approvals_changed_on_commit(run_pk=request.run_id)
    return count
