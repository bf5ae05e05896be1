"""Errors of the approvals service.

ApprovalError
  ApprovalNotFound          (404)
  ApprovalTokenInvalid      (400: the token authorizes nothing)
  ApprovalNotDecidable      (409: decided, expired, superseded, used, or the run is cancelled)
"""

from __future__ import annotations

__all__ = ["ApprovalError", "ApprovalNotDecidable", "ApprovalNotFound", "ApprovalTokenInvalid"]


class ApprovalError(Exception):
    """Base for errors a caller of the approvals services can act on."""


class ApprovalNotFound(ApprovalError):
    def __init__(self, run_id: str, approval_id: str) -> None:
        super().__init__(f"Run {run_id!r} has no approval request {approval_id!r}.")


class ApprovalTokenInvalid(ApprovalError):
    def __init__(self) -> None:
        super().__init__("The approval token does not verify for this request and run.")


class ApprovalNotDecidable(ApprovalError):
    def __init__(self, reason: str, *, status: str) -> None:
        super().__init__(reason)
        self.status = status
