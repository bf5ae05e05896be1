"""Approval requests: the exact call a run waits on, its signed token, and the verdict."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from runs.secrets.sealing import seal_value, unseal_value

__all__ = ["ApprovalRequest"]


class ApprovalRequest(models.Model):
    """One gated tool call waiting for a reviewer, bound to a run and to the checkpoint (revision) that asked."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        DENIED = "denied", "Denied"
        EXPIRED = "expired", "Expired"
        SUPERSEDED = "superseded", "Superseded"
        USED = "used", "Used"
        CANCELLED = "cancelled", "Cancelled with the run"

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="approval_requests")
    # The checkpoint that asked; emptied when retention prunes the run's checkpoints (the request stays as audit).
    revision = models.ForeignKey(
        "runs.Checkpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="approval_requests"
    )
    approval_id = models.CharField(max_length=200)
    tool_call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200)
    # Codec JSON of the exact input, sealed like checkpoints (DEUZ_ENCRYPTION_KEYS); read it as ``tool_input``.
    input_data = models.BinaryField(default=bytes, help_text="The tool input, sealed when encryption keys are set.")
    agent_path = models.JSONField(default=list, blank=True)
    operation_id = models.CharField(
        max_length=500, blank=True, db_index=True,
        help_text="The business operation the call would perform, when its tool names one (Effect(operation_key=...)).",
    )
    token = models.TextField(help_text="The signed token handed to reviewers; a bearer credential for this call.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING, db_index=True)
    issued_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="approval_verdicts"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    # Edit, then approve: the input the approver approved instead of the model's, sealed like input_data, and the
    # server's token for that edited request (the approval's next revision, runs.runtime.approvals.sign_edit).
    edited_input_data = models.BinaryField(
        default=bytes, blank=True, help_text="The edited input approved instead, sealed when encryption keys are set."
    )
    edited_token = models.TextField(
        blank=True, help_text="The server's token for the edited request; a bearer credential like token."
    )

    class Meta:
        ordering = ["-issued_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["run", "approval_id"], name="approval_id_unique_per_run")]
        permissions = [("decide_approvalrequest", "Can approve or deny approval requests")]

    def __str__(self) -> str:
        return f"{self.tool_name} in {self.run.run_id} ({self.status})"

    @property
    def tool_input(self) -> dict:
        """The exact input of the call this request gates."""
        return unseal_value(self.input_data) if self.input_data else {}

    @tool_input.setter
    def tool_input(self, value: dict) -> None:
        self.input_data = seal_value(value)

    @property
    def is_edited(self) -> bool:
        """True when it was approved with an edited input (decided_by made the edit)."""
        return bool(self.edited_token)

    @property
    def edited_input(self) -> dict | None:
        """The input approved instead of the model's, or None when it was not edited."""
        return unseal_value(self.edited_input_data) if self.edited_token and self.edited_input_data else None

    @edited_input.setter
    def edited_input(self, value: dict) -> None:
        self.edited_input_data = seal_value(value)

    def as_request(self) -> dict:
        """The ToolApprovalRequest dict this row stores, with its token."""
        request = {
            "approval_id": self.approval_id,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "input": self.tool_input,
            "token": self.token,
        }
        if self.agent_path:
            request["agent_path"] = list(self.agent_path)
        if self.operation_id:
            request["operation_id"] = self.operation_id
        return request
