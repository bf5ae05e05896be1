"""The sandboxes' books moved from the runs app to the demo app: a database migrated from the old layout keeps
every row, under the demo app's tables and content types."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

OLD_LAYOUT = [("runs", "0011_history_indexes"), ("demo", None)]


@pytest.fixture
def old_layout_database(transactional_db):
    """The database as it was before the move, with a payment and a command in the runs app's tables; migrated to
    the newest layout again afterwards, for the tests that follow."""
    executor = MigrationExecutor(connection)
    executor.migrate(OLD_LAYOUT)
    old = executor.loader.project_state(OLD_LAYOUT[0]).apps
    old.get_model("runs", "SandboxPayment").objects.create(
        operation_id="reimbursement:r1:call-1", fingerprint="f" * 64, request={"amount": "84.20"},
        transaction_id="tx-1",
    )
    old.get_model("runs", "SandboxCommand").objects.create(
        operation_id="coder:r2:call-1", command="pytest -q", exit_code=0, output="3 passed",
    )
    yield executor
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def migrate_to_newest(executor: MigrationExecutor) -> None:
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_the_sandbox_rows_survive_the_move_to_the_demo_app(old_layout_database):
    migrate_to_newest(old_layout_database)
    from demo.models import SandboxCommand, SandboxPayment

    assert list(SandboxPayment.objects.values_list("operation_id", "transaction_id")) == [
        ("reimbursement:r1:call-1", "tx-1")]
    assert list(SandboxCommand.objects.values_list("command", "output")) == [("pytest -q", "3 passed")]


def test_the_moved_tables_carry_the_demo_apps_names(old_layout_database):
    migrate_to_newest(old_layout_database)
    tables = set(connection.introspection.table_names())
    assert {"demo_sandboxpayment", "demo_sandboxcommand"} <= tables
    assert not {"runs_sandboxpayment", "runs_sandboxcommand"} & tables
