"""The benchmark command runs and reports every figure; the storage bars (bytes, not time) hold on this back end.

No timings are asserted: speed is judged from the printed numbers and bench/results.json, never by a test.
"""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from bench import storage
from bench.database_state import DEAD_ROWS_WARN, dead_rows, dead_rows_warning

# The benchmarks drive the stores from their own event loops; the shared run starts 3 fresh worker processes.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


def test_storage_grows_linearly_with_the_history():
    result = storage.measure(60)
    assert result.growth_ratio <= 1.2 and result.total_ratio <= 2.0


@pytest.fixture(scope="module")
def bench_output(django_db_setup, django_db_blocker, tmp_path_factory):
    """One small run of the whole bench (20 steps, one repeat), shared by the tests of its output."""
    path = tmp_path_factory.mktemp("bench") / "results.json"
    out = StringIO()
    with django_db_blocker.unblock():
        call_command("bench", quick=True, steps=20, repeats=1, parts="core", output=str(path), stdout=out,
                     stderr=StringIO())
    return out.getvalue(), json.loads(path.read_text())


def test_the_table_has_every_figure(bench_output):
    printed, _ = bench_output
    for heading in ("overhead per step", "floor (INSERT+COMMIT, same commits)", "growth (steps 191-200 / 1-10",
                    "As the worker runs a leg", "Resume of a 20-step run in a fresh worker process",
                    "warm (same process)", "fresh without the warm-up", "load a 1,000-step history"):
        assert heading in printed


def test_the_results_file_holds_the_overhead_beside_its_floor(bench_output):
    _, results = bench_output
    (database,) = results["databases"]
    row = database["overhead"][0]
    assert row["floor_ms"]["median"] > 0 and row["ratio"] == pytest.approx(row["overhead_ms"]["median"] / row["floor_ms"]["median"])


def test_sqlite_is_measured_with_synchronous_full_too(bench_output):
    _, results = bench_output
    (database,) = results["databases"]
    if database["vendor"] != "sqlite":
        pytest.skip("SQLite only")
    assert [row["synchronous"] for row in database["overhead"]][:2] == ["NORMAL", "FULL"]


def test_the_overhead_is_measured_through_the_orms_thread_too_in_the_same_run(bench_output):
    _, results = bench_output
    (database,) = results["databases"]
    assert "DEUZ_DIRECT_SAVES=0" in database["overhead"][-1]["label"]


def test_the_resume_is_measured_in_a_fresh_process_with_start_up_apart(bench_output):
    _, results = bench_output
    resume = results["databases"][0]["resume"]
    assert min(resume[name]["median"] for name in ("startup_ms", "resume_ms", "connect_ms", "django_setup_ms")) > 0


def test_the_fresh_figure_counts_what_start_up_waited_for_the_warm_up(bench_output):
    _, results = bench_output
    resume = results["databases"][0]["resume"]
    assert resume["warmup_own_ms"]["median"] > 0  # the warm-up ran, on its own thread
    fresh = resume["fresh_ms"]["median"]
    assert fresh >= resume["resume_ms"]["median"] and fresh >= resume["warmup_waited_ms"]["median"]


def test_the_warm_resume_and_the_one_without_the_warm_up_are_measured_beside_the_fresh_one(bench_output):
    _, results = bench_output
    resume = results["databases"][0]["resume"]
    assert resume["warm_resume_ms"]["median"] > 0 and resume["without_warmup"]["fresh_ms"]["median"] > 0
    assert resume["without_warmup"]["warmup_own_ms"]["median"] == 0  # no warm-up ran there
    assert resume["bar_figure"] in resume


def test_the_leg_is_measured_with_its_journal(bench_output):
    _, results = bench_output
    assert results["databases"][0]["leg"]["journal_parts"] > 20  # streamed text: several parts a step


def test_too_few_steps_is_a_clear_error():
    with pytest.raises(CommandError, match="at least 20"):
        call_command("bench", steps=5, stdout=StringIO())


def test_the_dead_rows_of_earlier_runs_are_counted_on_postgresql():
    count = dead_rows()
    if connection.vendor == "postgresql":
        assert isinstance(count, int) and count >= 0
    else:
        assert count is None


def test_many_dead_rows_are_a_warning_naming_the_database_and_the_cure():
    warning = dead_rows_warning(DEAD_ROWS_WARN + 1, database="PostgreSQL")
    assert warning is not None
    assert "PostgreSQL holds 100,001 dead rows" in warning and "new database" in warning


def test_few_dead_rows_are_no_warning():
    assert dead_rows_warning(DEAD_ROWS_WARN - 1, database="PostgreSQL") is None
    assert dead_rows_warning(None, database="SQLite") is None


def test_the_results_file_records_the_dead_rows_found(bench_output):
    _, results = bench_output
    assert "dead_rows_at_start" in results["databases"][0]


def test_the_machines_speed_is_probed_at_the_start_and_the_end(bench_output):
    printed, results = bench_output
    start, end = results["machine"]["cpu_probe_ms"]
    assert start > 0 and end > 0
    assert f"took {start:.0f} ms at the start and {end:.0f} ms at the end" in printed
