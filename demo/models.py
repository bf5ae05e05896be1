"""The demo sandboxes' own books, outside the agents' effect ledger: what the pretend payment provider paid and
what the pretend shell ran, so the crash tests can check what really happened outside the run."""

from __future__ import annotations

from django.db import models

__all__ = ["SandboxCommand", "SandboxExpense", "SandboxMessage", "SandboxPayment"]


class SandboxExpense(models.Model):
    """An expense of the sandbox's books besides the two built-in ones (demo.sandbox.EXPENSES): the crash matrix
    files one per case, so each case pays an expense of its own (a payment is a business operation, made once
    per expense whichever run asks)."""

    expense_id = models.CharField(max_length=40, unique=True, help_text="exp- and digits, as the demo agent reads it.")
    employee = models.CharField(max_length=200)
    amount = models.CharField(max_length=20)
    currency = models.CharField(max_length=3)
    description = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=100, default="approved by finance")

    class Meta:
        ordering = ["expense_id"]

    def __str__(self) -> str:
        return f"{self.expense_id} ({self.amount} {self.currency})"

    def record(self) -> dict:
        return {"expense_id": self.expense_id, "employee": self.employee, "amount": self.amount,
                "currency": self.currency, "description": self.description, "status": self.status}


class SandboxPayment(models.Model):
    """The demo payment provider's own books (outside the agent's ledger): one row per operation id."""

    operation_id = models.CharField(max_length=300, unique=True)
    fingerprint = models.CharField(max_length=64)
    request = models.JSONField()
    transaction_id = models.CharField(max_length=40)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.transaction_id} ({self.operation_id})"

    def receipt(self) -> dict:
        return {"transaction_id": self.transaction_id, "operation_id": self.operation_id, **self.request,
                "status": "committed"}


class SandboxCommand(models.Model):
    """The demo shell sandbox's own log (outside the agent's ledger): one row per command it ran. Not unique per
    operation: like a real shell it would run a repeat again, so a duplicate would show here."""

    operation_id = models.CharField(max_length=500, db_index=True)
    command = models.TextField()
    exit_code = models.IntegerField()
    output = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.command} ({self.operation_id})"

    def result(self) -> dict:
        return {"command": self.command, "exit_code": self.exit_code, "output": self.output,
                "operation_id": self.operation_id}


class SandboxMessage(models.Model):
    """The demo mail sandbox's outbox (outside the agent's ledger): one row per message the assistant agent sent,
    per operation id, so a repeat of the same operation sends nothing twice; nothing leaves the machine."""

    operation_id = models.CharField(max_length=500, unique=True)
    to = models.CharField(max_length=200)
    body = models.TextField()
    message_id = models.CharField(max_length=40)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.message_id} to {self.to}"

    def receipt(self) -> dict:
        return {"message_id": self.message_id, "operation_id": self.operation_id, "to": self.to, "body": self.body,
                "status": "sent"}
