"""The fleet parts of the bench (issue 8, items 4-6): their arithmetic, their table, and one tiny run of each
with real daphne and worker processes on this database. No timings are asserted."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from bench import motion, tail, throughput
from bench.fleet import BENCH_ENV
from bench.report import fleet_table
from bench.stats import percentile, summary
from tests.bench.fleets import fleet_on_test_database


def test_a_percentile_is_the_nearest_rank():
    values = [float(value) for value in range(1, 101)]  # 1..100
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (50.0, 99.0, 100.0)


def test_p99_of_fifty_values_is_the_slowest():
    values = [10.0] * 49 + [500.0]
    assert percentile(values, 99) == 500.0 and percentile(values, 50) == 10.0


def test_a_percentile_of_nothing_is_refused():
    with pytest.raises(ValueError, match="No values"):
        percentile([], 50)


def test_a_percentile_beyond_100_is_refused():
    with pytest.raises(ValueError, match="between 0 and 100"):
        percentile([1.0], 101)


def test_the_summary_of_nothing_says_so_by_its_count():
    assert summary([]) == {"n": 0, "p50": 0.0, "p99": 0.0, "max": 0.0, "mean": 0.0}


def test_the_summary_counts_and_averages():
    assert summary([1.0, 2.0, 3.0, 6.0]) == {"n": 4, "p50": 2.0, "p99": 6.0, "max": 6.0, "mean": 3.0}


def _latency(p99: float) -> dict:
    return {"n": 50, "p50": 20.0, "p99": p99, "max": p99, "mean": 25.0}


def _stream(*, p99: float, delivered: bool = True, bar_ms: float = 20.0) -> dict:
    return {"runs": 10, "followers": 500, "transports": {"sse": 250, "websocket": 250}, "latency_ms": _latency(p99),
            "every_part_delivered": delivered, "followers_incomplete": 0 if delivered else 3,
            "parts_missing": 0 if delivered else 7, "parts_repeated": 0, "server_rss_before": 100 * 2**20,
            "server_rss_peak": 180 * 2**20, "bar_ms": bar_ms}


def _results(*, motion_p99: float = 80.0, tail_p99: float = 15.0, fanout_p99: float = 300.0, lost: int = 0,
             delivered: bool = True) -> dict:
    fleet = {
        "motion": {"worker": "a worker process", "wake": "LISTEN/NOTIFY", "channel_layer": "Redis", "bar_ms": 100.0,
                   "latency_ms": _latency(motion_p99),
                   "breakdown_ms": {"to_claim": 2.0, "claim_to_part": 30.0, "part_to_follower": 12.0}},
        "tail": _stream(p99=tail_p99), "fanout": _stream(p99=fanout_p99, delivered=delivered, bar_ms=50.0),
        "throughput": {"runs": 1000, "steps": 20, "workers": 2, "concurrency": 16, "seconds": 50.0,
                       "runs_per_second": 20.0, "steps_per_second": 400.0, "steps_lost": lost, "steps_repeated": 0,
                       "journal_gaps": 0, "runs_with_wrong_steps": 0},
    }
    fleet["throughput_scaling"] = [_scaled(workers, steps_per_second, lost=lost if workers == 2 else 0)
                                   for workers, steps_per_second in ((1, 500.0), (2, 800.0), (4, 780.0))]
    return {"databases": [{"label": "PostgreSQL", "fleet": fleet}]}


def _scaled(workers: int, steps_per_second: float, *, lost: int = 0) -> dict:
    return {"runs": 1000, "steps": 20, "workers": workers, "concurrency": 16, "seconds": 20_000 / steps_per_second,
            "steps_per_second": steps_per_second, "steps_lost": lost, "steps_repeated": 0, "journal_gaps": 0,
            "runs_with_wrong_steps": 0, "cpu_ms_per_step": {"workers": 1.5, "database": 0.75, "total": 2.25},
            "cores_busy": 1.8, "cpus": 2}


def test_the_table_says_ok_under_the_bars():
    printed = "\n".join(fleet_table(_results(fanout_p99=40.0)))
    motion_row = next(line for line in printed.splitlines() if "LISTEN/NOTIFY" in line)
    tail_row = next(line for line in printed.splitlines() if "live tail" in line)
    fanout_row = next(line for line in printed.splitlines() if "| fan-out |" in line)
    assert "| ok |" in motion_row and "| ok |" in tail_row and "| p99 < 50 | ok |" in fanout_row


def test_the_table_says_by_how_much_a_bar_is_missed():
    printed = "\n".join(fleet_table(_results(motion_p99=150.0, tail_p99=50.0, fanout_p99=125.0)))
    assert "MISSED by 50.0 ms (1.5x)" in printed and "MISSED by 30.0 ms (2.5x)" in printed
    assert "MISSED by 75.0 ms (2.5x)" in printed


def test_the_table_names_what_a_fan_out_did_not_deliver():
    printed = "\n".join(fleet_table(_results(delivered=False)))
    assert "NO: 3 followers short, 7 parts missing, 0 repeated" in printed


def test_the_table_marks_a_lost_step():
    printed = "\n".join(fleet_table(_results(lost=2)))
    row = next(line for line in printed.splitlines() if "1,000 × 20" in line)
    assert row.endswith("| MISSED |")


def _scaling_rows(printed: str) -> list[str]:
    return [line for line in printed.splitlines() if line.startswith("| PostgreSQL | 1,000 × 20 | ")
            and line.count("|") == 14]


def test_the_throughput_is_shown_with_one_two_and_four_workers_and_the_cpu_per_step():
    printed = "\n".join(fleet_table(_results()))
    rows = _scaling_rows(printed)
    assert [row.split("|")[3].strip() for row in rows] == ["1 × 16", "2 × 16", "4 × 16"]
    assert [row.split("|")[6].strip() for row in rows] == ["1.00x", "1.60x", "1.56x"]
    assert all("| 1.50 | 0.75 | 2.25 | 1.80 (2) |" in row for row in rows)


def test_the_scaling_table_marks_a_lost_step():
    rows = _scaling_rows("\n".join(fleet_table(_results(lost=2))))
    assert [row.endswith("| MISSED |") for row in rows] == [False, True, False]


def test_the_table_shows_daphnes_memory():
    assert "100 MiB → 180 MiB" in "\n".join(fleet_table(_results()))


def test_without_fleet_parts_there_is_no_fleet_table():
    assert fleet_table({"databases": [{"label": "SQLite"}]}) == []


@pytest.fixture
def fleet(tmp_path: Path):
    """daphne (with an embedded worker on SQLite) and two worker processes on the test database."""
    embedded = connection.vendor == "sqlite"
    env = {**BENCH_ENV, "DEUZ_BENCH_STEPS": "3", "DEUZ_BENCH_TAIL_PARTS": "4", "DEUZ_BENCH_TAIL_INTERVAL_MS": "10",
           "DEUZ_BENCH_TAIL_LEAD_MS": "0", "DEUZ_LEASE_SECONDS": "5"}
    with fleet_on_test_database(tmp_path, redis_url=settings.REDIS_URL or "", workers=0 if embedded else 2,
                                concurrency=4, serve_workers=1 if embedded else 0, env=env) as processes:
        yield processes


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(300)
def test_the_fleet_parts_run_end_to_end_at_a_tiny_size(fleet):
    moved = motion.measure_on(fleet, approvals=3, embedded=fleet.serve_workers > 0, redis=bool(fleet.redis_url))
    if fleet.serve_workers:  # the tail and the throughput run on worker processes
        fleet.serve_workers, fleet.worker_count = 0, 2
        fleet.stop()
        fleet.start(workers=False)
    else:
        fleet.stop_workers()
    tailed = tail.measure_on(fleet, runs=2, followers=3, label="tail-test")
    one, two = throughput.scaling(fleet, runs=3, steps=3, concurrency=2, counts=(1, 2))
    assert moved["latency_ms"]["n"] == 3 and set(moved["breakdown_ms"]) == {"to_claim", "claim_to_part",
                                                                             "part_to_follower"}
    assert tailed["every_part_delivered"] and tailed["followers"] == 3 and tailed["parts_per_run"] > 4
    assert (one["workers"], two["workers"]) == (1, 2)
    for drained in (one, two):
        assert drained["statuses"] == {"completed": 3}
        assert (drained["steps_lost"], drained["steps_repeated"], drained["journal_gaps"],
                drained["runs_with_wrong_steps"], drained["legs_beyond_one"]) == (0, 0, 0, 0, 0)
        assert drained["cpu_ms_per_step"]["workers"] > 0 and drained["cores_busy"] > 0
        if connection.vendor == "postgresql":
            assert drained["cpu_ms_per_step"]["database"] > 0
