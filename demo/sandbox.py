"""Sandboxes the demo agents act on: a payment provider, a shell, a contact book and an outbox, never the real
things.

Both keep their own books (SandboxPayment, SandboxCommand), outside the agent's effect ledger, so crash tests
can check what really happened. ``DEUZ_SANDBOX_PAYMENTS`` (comma-separated) makes the provider misbehave, per
process: ``commit-then-timeout`` commits a payment and then times out; ``reads-unavailable`` makes every lookup
fail, as a provider whose read API is down.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from django.db import IntegrityError, transaction

from demo.models import SandboxCommand, SandboxExpense, SandboxMessage, SandboxPayment

__all__ = [
    "CONTACTS",
    "EXPENSES",
    "SandboxTimeout",
    "SandboxUnavailable",
    "sandbox_contact",
    "sandbox_expense",
    "sandbox_message_lookup",
    "sandbox_message_send",
    "sandbox_pay",
    "sandbox_payment_lookup",
    "sandbox_shell",
    "sandbox_shell_lookup",
]

EXPENSES = {
    "exp-1042": {"expense_id": "exp-1042", "employee": "Ada Lovelace", "amount": "84.20", "currency": "EUR",
                 "description": "Train to the Zurich offsite", "status": "approved by finance"},
    "exp-2077": {"expense_id": "exp-2077", "employee": "Grace Hopper", "amount": "1250.00", "currency": "USD",
                 "description": "Conference registration", "status": "approved by finance"},
}


class SandboxTimeout(TimeoutError):
    """The provider did not answer in time; whether the payment happened is unknown to the caller."""


class SandboxUnavailable(ConnectionError):
    """The provider's read API cannot be reached: nobody can tell whether an operation happened."""


def _modes() -> set[str]:
    return {mode.strip() for mode in os.environ.get("DEUZ_SANDBOX_PAYMENTS", "").split(",") if mode.strip()}


def _fingerprint(request: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


def sandbox_expense(expense_id: str) -> dict[str, Any] | None:
    """An expense of the sandbox's books: a built-in one, or one filed as a SandboxExpense; None when unknown."""
    if expense_id in EXPENSES:
        return dict(EXPENSES[expense_id])
    filed = SandboxExpense.objects.filter(expense_id=expense_id).first()
    return filed.record() if filed is not None else None


def sandbox_pay(*, operation_id: str, expense_id: str, amount: str, currency: str, recipient: str) -> dict[str, Any]:
    """Pay once per operation id: a repeat with the same request returns the first receipt; a repeat with a
    different request is refused."""
    request = {"expense_id": expense_id, "amount": amount, "currency": currency, "recipient": recipient}
    fingerprint = _fingerprint(request)
    try:
        with transaction.atomic():
            payment = SandboxPayment.objects.create(
                operation_id=operation_id, fingerprint=fingerprint, request=request,
                transaction_id=f"tx-{hashlib.sha256(operation_id.encode()).hexdigest()[:10]}",
            )
    except IntegrityError:
        payment = SandboxPayment.objects.get(operation_id=operation_id)
        if payment.fingerprint != fingerprint:
            raise ValueError(f"Operation {operation_id} was already used for a different payment.") from None
    if "commit-then-timeout" in _modes():
        raise SandboxTimeout("The payment provider did not answer within 30 s.")
    return payment.receipt()


def sandbox_payment_lookup(*, operation_id: str) -> dict[str, Any] | None:
    """The provider's own record of an operation (what reconciliation and verification read)."""
    if "reads-unavailable" in _modes():
        raise SandboxUnavailable("The payment provider's read API is unavailable.")
    payment = SandboxPayment.objects.filter(operation_id=operation_id).first()
    return payment.receipt() if payment else None


_SHELL = {
    "pytest": "collected 3 items\n\ntests/test_math.py ...                                   [100%]\n\n3 passed in 0.02s",
    "git diff": "--- a/mathlib.py\n+++ b/mathlib.py\n-    return a - b\n+    return a + b",
}


def _shell_output(command: str) -> tuple[int, str]:
    for prefix, output in _SHELL.items():
        if command.strip().startswith(prefix):
            return 0, output
    words = command.split()
    return 127, f"sandbox: {words[0] if words else ''}: not available"


def sandbox_shell(command: str, *, operation_id: str = "") -> dict[str, Any]:
    """A pretend shell: canned output for known commands, exit 127 for the rest; nothing is executed. Each run is
    logged under its operation id, and, like a real shell, a repeat runs again."""
    exit_code, output = _shell_output(command)
    if operation_id:
        SandboxCommand.objects.create(operation_id=operation_id, command=command, exit_code=exit_code, output=output)
    return {"command": command, "exit_code": exit_code, "output": output}


def sandbox_shell_lookup(*, operation_id: str) -> dict[str, Any] | None:
    """The shell log's record of an operation (what reconciliation reads), or None when it never ran."""
    ran = SandboxCommand.objects.filter(operation_id=operation_id).order_by("id").first()
    if ran is None:
        return None
    return {"command": ran.command, "exit_code": ran.exit_code, "output": ran.output}


#: The assistant agent's contact book, by first name in lower case.
CONTACTS = {
    "ada": {"name": "Ada Lovelace", "email": "ada@example.test"},
    "grace": {"name": "Grace Hopper", "email": "grace@example.test"},
    "alan": {"name": "Alan Turing", "email": "alan@example.test"},
}


def sandbox_contact(name: str) -> dict[str, Any] | None:
    """A contact by first or full name (any case), or None."""
    wanted = name.strip().lower()
    for key, contact in CONTACTS.items():
        if wanted in (key, contact["name"].lower()):
            return dict(contact)
    return None


def sandbox_message_send(*, operation_id: str, to: str, body: str) -> dict[str, Any]:
    """Send once per operation id (into the sandbox's outbox): a repeat returns the first receipt."""
    message, _ = SandboxMessage.objects.get_or_create(
        operation_id=operation_id,
        defaults={"to": to, "body": body, "message_id": f"msg-{hashlib.sha256(operation_id.encode()).hexdigest()[:10]}"},
    )
    return message.receipt()


def sandbox_message_lookup(*, operation_id: str) -> dict[str, Any] | None:
    """The outbox's record of an operation (what reconciliation reads), or None when nothing was sent."""
    message = SandboxMessage.objects.filter(operation_id=operation_id).first()
    return message.receipt() if message else None
