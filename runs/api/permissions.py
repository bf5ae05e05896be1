"""DRF permission classes of the runs API, one per rule of runs.access and approvals.roles.

  CanReadRun            object: the run's creator or who may read every run; others get 404, as for no run
  CanCancelRun          object: the run's creator or who may cancel every run; others (who may read it) get 403
  CanForkRun            object: support and reviewers fork a run's checkpoint; others (who may read it) get 403
  CanDecideApprovals    object: who may approve or deny the run's requests; others get 403
  CanReadThread         object: as CanReadRun, for a thread
  CanWriteThread        object: the thread's creator adds its messages; others (who may read it) get 403

Views list these in ``permission_classes`` and call ``check_object_permissions`` with the run they looked up; no
permission string appears in a view.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission

from approvals.roles import NOT_DECIDABLE, approval_refusal
from runs.access import (
    CANCEL_EVERY_RUN,
    run_is_cancellable_by,
    run_is_forkable_by,
    run_is_readable_by,
    thread_is_readable_by,
    thread_is_writable_by,
)
from runs.errors import RunNotFound, ThreadNotFound

__all__ = ["CanCancelRun", "CanDecideApprovals", "CanForkRun", "CanReadRun", "CanReadThread", "CanWriteThread"]


class CanReadRun(BasePermission):
    """Reading a run; a run the user may not read is answered as if it did not exist, so ids cannot be probed."""

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        if not run_is_readable_by(obj, user=request.user):
            raise RunNotFound(obj.run_id)
        return True


class CanCancelRun(BasePermission):
    """Cancelling a run (after CanReadRun, so only someone who may read it learns why they may not cancel it)."""

    message = f"Only the run's creator may cancel it, or a user with the {CANCEL_EVERY_RUN} permission."

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        return run_is_cancellable_by(obj, user=request.user)


class CanForkRun(BasePermission):
    """Forking a run from one of its checkpoints (after CanReadRun, so only someone who may read it learns why)."""

    message = "Forking a run needs the support or reviewers role (the permission to read every run)."

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        return run_is_forkable_by(obj, user=request.user)


class CanDecideApprovals(BasePermission):
    """Approving or denying the requests of a run: reviewers, or the run's creator when its agent lets its creator
    decide (approvals.roles). Everyone else gets 403, whether the run exists or not (the view sees to an unknown
    one), so run ids cannot be probed here either."""

    message = NOT_DECIDABLE

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        refusal = approval_refusal(user=request.user, run=obj)
        if refusal is not None:
            self.message = refusal  # four eyes says why; DRF makes one instance per request
        return refusal is None


class CanReadThread(BasePermission):
    """Reading a thread; one the user may not read is answered as if it did not exist, as for runs."""

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        if not thread_is_readable_by(obj, user=request.user):
            raise ThreadNotFound(obj.thread_id)
        return True


class CanWriteThread(BasePermission):
    """Adding a message to a thread (after CanReadThread)."""

    message = "Only the thread's creator adds messages to it."

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        return thread_is_writable_by(obj, user=request.user)
