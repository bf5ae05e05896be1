"""Approval inputs are stored like checkpoints: losslessly on every database (NUL included, which PostgreSQL's
jsonb refuses) and sealed when encryption keys are set."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from approvals.models import ApprovalRequest
from approvals.services import approval_requests_record
from runs.models import Checkpoint
from tests.factories import make_run

pytestmark = pytest.mark.django_db


def record(tool_input):
    run = make_run("r1")
    revision = Checkpoint.objects.create(run=run, session_key="r1", step_index=0, status="suspended",
                                         message_count=0, created_at_ms=0, owner_epoch=0)
    approval_requests_record(revision=revision, requests=[
        {"approval_id": "a1", "tool_call_id": "c1", "tool_name": "pay_expense", "input": tool_input}])
    return ApprovalRequest.objects.get(approval_id="a1")


def test_an_input_with_a_nul_character_is_stored_and_read_back_exactly():
    tool_input = {"note": "before\x00after", "nested": {"k\x00": [1, "\x00"]}}
    assert record(tool_input).tool_input == tool_input


def test_an_input_with_bytes_is_stored_and_read_back_exactly():
    assert record({"blob": b"\x00\xff"}).tool_input == {"blob": b"\x00\xff"}


def test_with_encryption_keys_the_input_is_not_stored_in_clear(settings):
    settings.DEUZ_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    stored = record({"recipient": "Ada Lovelace"})
    assert b"Lovelace" not in bytes(stored.input_data) and stored.tool_input == {"recipient": "Ada Lovelace"}
