"""Who may read and act on runs: the rules every route, page, admin view and socket applies.

  the run's creator        read, follow and cancel their own runs
  runs.view_every_run      read every run, timeline, checkpoint list and receipt (support, reviewers), and fork a
                           new run from any of its checkpoints (runs.services.fork)
  runs.cancel_every_run    cancel any run (granted to no group; superusers have every permission)
  runs.resolve_effect      resolve an effect that needs review (reviewers)

Deciding approvals is the approvals app's permission (approvals.roles). A user who may not read a run is
told it does not exist (404), so run ids cannot be probed.

Threads follow the same rules: their creator reads and writes them (adds turns), runs.view_every_run reads every
thread, and nobody else learns that one exists.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

__all__ = [
    "CANCEL_EVERY_RUN",
    "RESOLVE_EFFECTS",
    "VIEW_EVERY_RUN",
    "effect_is_resolvable_by",
    "run_is_cancellable_by",
    "run_is_forkable_by",
    "run_is_readable_by",
    "runs_readable_by",
    "thread_is_readable_by",
    "thread_is_writable_by",
    "threads_readable_by",
]

VIEW_EVERY_RUN = "runs.view_every_run"
CANCEL_EVERY_RUN = "runs.cancel_every_run"
RESOLVE_EFFECTS = "runs.resolve_effect"


def _is_signed_in(user: Any) -> bool:
    return user is not None and user.is_authenticated and user.is_active


def runs_readable_by(runs: QuerySet, *, user: Any) -> QuerySet:
    """``runs`` narrowed to those ``user`` may read."""
    if not _is_signed_in(user):
        return runs.none()
    if user.has_perm(VIEW_EVERY_RUN):
        return runs
    return runs.filter(created_by_id=user.pk)


def run_is_readable_by(run: Any, *, user: Any) -> bool:
    return _is_signed_in(user) and (run.created_by_id == user.pk or user.has_perm(VIEW_EVERY_RUN))


def run_is_cancellable_by(run: Any, *, user: Any) -> bool:
    return _is_signed_in(user) and (run.created_by_id == user.pk or user.has_perm(CANCEL_EVERY_RUN))


def run_is_forkable_by(run: Any, *, user: Any) -> bool:
    """Forking a new run from one of ``run``'s checkpoints: support and reviewers (who read every run), not the
    run's creator as such, since a fork's approvals go to reviewers."""
    return _is_signed_in(user) and user.has_perm(VIEW_EVERY_RUN)


def effect_is_resolvable_by(*, user: Any) -> bool:
    return _is_signed_in(user) and user.has_perm(RESOLVE_EFFECTS)


def threads_readable_by(threads: QuerySet, *, user: Any) -> QuerySet:
    """``threads`` narrowed to those ``user`` may read: as for runs."""
    return runs_readable_by(threads, user=user)


def thread_is_readable_by(thread: Any, *, user: Any) -> bool:
    return run_is_readable_by(thread, user=user)


def thread_is_writable_by(thread: Any, *, user: Any) -> bool:
    """Only the thread's creator adds messages to it (support and reviewers read it)."""
    return _is_signed_in(user) and thread.created_by_id == user.pk
