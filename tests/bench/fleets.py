"""The benchmarks' fleet on the test database, for the tests that run a bench part end to end at a tiny size."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.fleet import BENCH_SETTINGS, Fleet
from deuz_project.database_url import database_url

__all__ = ["fleet_on_test_database"]


@contextmanager
def fleet_on_test_database(log_dir: Path, *, redis_url: str, **options: Any) -> Iterator[Fleet]:
    """A started Fleet (``options``: its workers, concurrency, env...) on the test database, logging to
    ``log_dir``; stopped when the block ends."""
    with Fleet(database_url=database_url(), redis_url=redis_url, log_dir=log_dir, settings_module=BENCH_SETTINGS,
               app_prefix="deuz-bench-test-", **options) as processes:
        yield processes
