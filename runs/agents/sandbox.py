"""Sandboxes the demo agents act on: a payment provider and a shell, never the real things."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from django.db import IntegrityError, transaction

from runs.models import SandboxPayment

__all__ = ["EXPENSES", "SandboxTimeout", "sandbox_pay", "sandbox_payment_lookup", "sandbox_shell"]

EXPENSES = {
    "exp-1042": {"expense_id": "exp-1042", "employee": "Ada Lovelace", "amount": "84.20", "currency": "EUR",
                 "description": "Train to the Zurich offsite", "status": "approved by finance"},
    "exp-2077": {"expense_id": "exp-2077", "employee": "Grace Hopper", "amount": "1250.00", "currency": "USD",
                 "description": "Conference registration", "status": "approved by finance"},
}


class SandboxTimeout(TimeoutError):
    """The provider did not answer in time; whether the payment happened is unknown to the caller."""


def _fingerprint(request: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


def sandbox_pay(*, operation_id: str, expense_id: str, amount: str, currency: str, recipient: str) -> dict[str, Any]:
    """Pay once per operation id: a repeat with the same request returns the first receipt; a repeat with a
    different request is refused. ``DEUZ_SANDBOX_PAYMENTS=commit-then-timeout`` commits, then times out."""
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
    if os.environ.get("DEUZ_SANDBOX_PAYMENTS") == "commit-then-timeout":
        raise SandboxTimeout("The payment provider did not answer within 30 s.")
    return payment.receipt()


def sandbox_payment_lookup(*, operation_id: str) -> dict[str, Any] | None:
    """The provider's own record of an operation (what reconciliation reads)."""
    payment = SandboxPayment.objects.filter(operation_id=operation_id).first()
    return payment.receipt() if payment else None


_SHELL = {
    "pytest": "collected 3 items\n\ntests/test_math.py ...                                   [100%]\n\n3 passed in 0.02s",
    "git diff": "--- a/mathlib.py\n+++ b/mathlib.py\n-    return a - b\n+    return a + b",
}


def sandbox_shell(command: str) -> dict[str, Any]:
    """A pretend shell: canned output for known commands, exit 127 for the rest. Nothing is executed."""
    for prefix, output in _SHELL.items():
        if command.strip().startswith(prefix):
            return {"command": command, "exit_code": 0, "output": output}
    return {"command": command, "exit_code": 127, "output": f"sandbox: {command.split()[0] if command.split() else ''}: not available"}
