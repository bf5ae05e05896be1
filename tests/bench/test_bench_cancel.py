"""Cancel to stop (bench.cancel): its table, and one tiny run with real daphne (and on PostgreSQL with Redis a
worker process) on this database, through both doors. No timings are asserted."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from bench import cancel
from bench.fleet import BENCH_ENV
from bench.report import cancel_table
from tests.bench.fleets import fleet_on_test_database


def _results(p95: float) -> dict:
    door = {"wake": "LISTEN/NOTIFY", "latency_ms": {"n": 20, "p50": 40.0, "p99": p95, "max": p95, "mean": 50.0},
            "p95_ms": p95, "from_request_p95_ms": p95 + 5, "every_run_cancelled": True, "cancelled_by": ["bench-client"],
            "breakdown_ms": {"to_part_written": 30.0, "written_to_follower": 5.0}}
    part = {"cancels": 20, "bar_ms": 1000.0, "worker": "a worker process", "channel_layer": "Redis",
            "doors": {"api": door}}
    return {"databases": [{"label": "PostgreSQL", "cancel": part}]}


def test_the_cancel_table_says_ok_at_the_bar():
    row = next(line for line in cancel_table(_results(1000.0)) if "LISTEN/NOTIFY" in line)
    assert "| ok |" in row and "bench-client" in row


def test_the_cancel_table_says_by_how_much_the_bar_is_missed():
    assert "MISSED by 250.0 ms (1.2x)" in "\n".join(cancel_table(_results(1250.0)))


def test_without_the_cancel_part_there_is_no_cancel_table():
    assert cancel_table({"databases": [{"label": "SQLite"}]}) == []


@pytest.fixture
def fleet(tmp_path: Path):
    """daphne with an embedded worker (SQLite, or without Redis), else daphne and one worker process."""
    embedded = connection.vendor == "sqlite" or not settings.REDIS_URL
    with fleet_on_test_database(tmp_path, redis_url="" if embedded else settings.REDIS_URL,
                                workers=0 if embedded else 1, concurrency=2, serve_workers=1 if embedded else 0,
                                env=BENCH_ENV) as processes:
        yield processes


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(300)
def test_the_cancel_part_runs_end_to_end_at_a_tiny_size(fleet):
    measured = cancel.measure_on(fleet, cancels=2, embedded=fleet.serve_workers > 0)
    api, cli = measured["doors"]["api"], measured["doors"]["cli"]
    assert (api["latency_ms"]["n"], cli["latency_ms"]["n"]) == (2, 2)
    assert api["every_run_cancelled"] and cli["every_run_cancelled"]
    # The API's cancel is the run's owner's; the other process's is the system's (no user).
    assert (api["cancelled_by"], cli["cancelled_by"]) == (["bench-client"], ["None"])


@pytest.mark.django_db(transaction=True)
def test_a_cancels_count_below_one_is_refused():
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="--cancels must be at least 1"):
        call_command("bench", parts="cancel", cancels=0, stdout=StringIO(), stderr=StringIO())
