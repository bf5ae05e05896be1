"""Takeover (bench.takeover): its table, and one tiny run with real daphne and two worker processes on this
database, the Redis channel layer carrying the parts to the follower. No timings are asserted."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings

from bench import takeover
from bench.fleet import BENCH_ENV
from bench.report import takeover_table
from tests.bench.fleets import fleet_on_test_database


def _results(p99: float) -> dict:
    part = {"kills": 20, "bar_ms": 1000.0, "lease_seconds": 15, "recovered_by": ["recovery"],
            "latency_ms": {"n": 20, "p50": 200.0, "p99": p99, "max": p99, "mean": 250.0},
            "breakdown_ms": {"to_claim": 120.0, "claim_to_part": 80.0, "part_to_follower": 2.0},
            "continued_by": {"worker": 12, "follower": 8},
            "latency_by_leg_ms": {"first": {"n": 5, "p50": 500.0, "p99": 900.0, "max": 900.0, "mean": 550.0},
                                  "later": {"n": 15, "p50": 150.0, "p99": 250.0, "max": 250.0, "mean": 160.0}},
            "claim_to_part_by_leg_ms": {"first": {"n": 5, "p50": 400.0, "p99": 700.0, "max": 700.0, "mean": 450.0},
                                        "later": {"n": 15, "p50": 40.0, "p99": 90.0, "max": 90.0, "mean": 45.0}}}
    return {"databases": [{"label": "SQLite", "takeover": part}]}


def test_the_takeover_table_says_ok_under_the_bar():
    row = next(line for line in takeover_table(_results(999.0)) if line.startswith("| SQLite"))
    assert "| ok |" in row and "| 15 s |" in row and "recovery" in row


def test_the_takeover_table_says_by_how_much_the_bar_is_missed():
    assert "MISSED by 14000.0 ms (15.0x)" in "\n".join(takeover_table(_results(15000.0)))


def test_the_takeover_table_puts_the_lease_beside_the_figure_as_the_before():
    row = next(line for line in takeover_table(_results(500.0)) if line.startswith("| SQLite"))
    # 15 s of lease against a p50 of 200 ms and a p99 of 500 ms.
    assert row.endswith("| 8 follower, 12 worker | 15000 | 75x | 30x |")


def test_the_takeover_table_tells_a_process_s_first_leg_from_the_others():
    assert ("SQLite, by the recovery leg's process: its first leg (5 kills) p50 500.0, p99 900.0 ms (claim → first part "
            "written 400.0); after another leg (15 kills) p50 150.0, p99 250.0 ms (claim → first part written 40.0).") \
        in "\n".join(takeover_table(_results(500.0)))


def test_a_full_bench_kills_twenty_workers_and_a_quick_one_fewer():
    from bench.fleet_parts import FULL, QUICK

    assert (FULL.kills, QUICK.kills < FULL.kills) == (20, True)


def test_without_the_takeover_part_there_is_no_takeover_table():
    assert takeover_table({"databases": [{"label": "SQLite"}]}) == []


@pytest.mark.skipif(not settings.REDIS_URL, reason="the follower hears the workers' parts through Redis")
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(300)
def test_the_takeover_part_runs_end_to_end_at_a_tiny_size(tmp_path: Path):
    with fleet_on_test_database(tmp_path, redis_url=settings.REDIS_URL, workers=2, concurrency=2,
                                env=BENCH_ENV) as fleet:
        measured = takeover.measure_on(fleet, kills=1)
    assert measured["latency_ms"]["n"] == 1 and measured["recovered_by"] == ["recovery"]
    assert sum(measured["continued_by"].values()) == 1
    assert measured["latency_by_leg_ms"]["first"]["n"] + measured["latency_by_leg_ms"]["later"]["n"] == 1
    # Each kill's worker was started again: the fleet still has two.
    assert len(fleet.workers) == 2
