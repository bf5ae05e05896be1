"""With encryption keys set, the journal's parts are sealed like checkpoints: the same tool inputs and results."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from runs.models import JournalEntry
from runs.stores.streams import DatabaseStreamStateStore
from tests.factories import make_run

pytestmark = pytest.mark.django_db

PARTS = [{"type": "tool-call", "tool_name": "pay_expense", "input": {"recipient": "Ada Lovelace"}},
         {"type": "text-delta", "text": "Paying Ada Lovelace"}]


def append(parts):
    make_run("sealed", owner_epoch=1)
    DatabaseStreamStateStore().fenced("sealed", 1).append_sync("sealed", parts)


def test_sealed_parts_hold_no_plaintext(settings):
    settings.DEUZ_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    append(PARTS)
    assert not any("Lovelace" in part for part in JournalEntry.objects.values_list("part", flat=True))


def test_sealed_parts_read_back_exactly(settings):
    settings.DEUZ_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    append(PARTS)
    assert [part for _, part in DatabaseStreamStateStore().read_sync("sealed").parts] == PARTS


def test_parts_stay_readable_after_a_key_rotation(settings):
    old = Fernet.generate_key().decode()
    settings.DEUZ_ENCRYPTION_KEYS = [old]
    append(PARTS)
    settings.DEUZ_ENCRYPTION_KEYS = [Fernet.generate_key().decode(), old]
    assert [part for _, part in DatabaseStreamStateStore().read_sync("sealed").parts] == PARTS


def test_parts_written_without_keys_stay_readable_once_keys_are_set(settings):
    settings.DEUZ_ENCRYPTION_KEYS = []
    append(PARTS)
    settings.DEUZ_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    assert JournalEntry.objects.filter(is_sentinel=False).first().decoded_part == PARTS[0]
