"""A worker warms its first resume at start-up (deuz_project.startup, runs.stores.warmup): on the ORM's thread,
where a leg's checkpoint reads go, its connection opens and the resume's two reads run once, so the first run
it resumes meets neither a cold connection nor cold statements (issue 25)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import SyncToAsync
from django.db import connections

from deuz_project.startup import worker_warmup_start

pytestmark = pytest.mark.django_db(transaction=True)


def _on_the_orms_thread(function):
    return SyncToAsync.single_thread_executor.submit(function).result()


@pytest.fixture
def orm_thread_queries():
    """The statements the ORM's thread runs (its connection's query log on), closed afterwards."""

    def log_on():
        connections["default"].force_debug_cursor = True
        connections["default"].queries_log.clear()

    _on_the_orms_thread(log_on)
    yield lambda: _on_the_orms_thread(lambda: [query["sql"] for query in connections["default"].queries])

    def log_off():
        connections["default"].force_debug_cursor = False
        connections.close_all()

    _on_the_orms_thread(log_off)


def test_the_warm_up_leaves_the_orms_thread_connected(orm_thread_queries):
    _on_the_orms_thread(connections.close_all)
    warmup = worker_warmup_start()
    warmup.wait()
    assert _on_the_orms_thread(lambda: connections["default"].connection is not None)
    assert warmup.seconds > 0


def test_the_warm_up_runs_the_resumes_two_reads_once(orm_thread_queries):
    worker_warmup_start().wait()
    statements = orm_thread_queries()
    latest = [sql for sql in statements if "runs_checkpoint" in sql and "ORDER BY" in sql]
    chain = [sql for sql in statements if "runs_runmessage" in sql and "parent_id" in sql]
    assert len(latest) == 1 and len(chain) == 1


@pytest.mark.skipif(connections["default"].vendor != "sqlite", reason="SQLite's direct connection")
def test_on_sqlite_the_warm_up_prepares_the_connection_the_loops_thread_reads_on():
    from runs.stores import direct_sqlite

    worker_warmup_start().wait()
    prepared = list(direct_sqlite._prepared.values())
    with ThreadPoolExecutor(1) as pool:  # a thread of its own, as a worker's event loop thread
        taken = pool.submit(direct_sqlite.read, lambda cursor: cursor.connection).result()
    assert prepared == [taken]
