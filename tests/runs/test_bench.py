"""The benchmark command runs, and the storage bars (bytes, not time) hold on this back end."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from bench import storage


@pytest.mark.django_db(transaction=True)  # the benchmark drives the store from its own event loop
def test_storage_grows_linearly_with_the_history():
    result = storage.measure(60)
    assert result.growth_ratio <= 1.2 and result.total_ratio <= 2.0


@pytest.mark.django_db(transaction=True)  # the benchmark drives the store from its own event loop
def test_the_bench_command_prints_its_ratios():
    out = StringIO()
    call_command("bench", quick=True, stdout=out)
    # Only that it measures and reports: speed is judged from the printed numbers, never by a timed test.
    assert "bytes written at the last step / at step 10" in out.getvalue() and "parts per second on" in out.getvalue()
