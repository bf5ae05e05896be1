"""Bad run settings are caught by `manage.py check`, naming the setting."""

from __future__ import annotations

import pytest
from django.core.checks import run_checks

pytestmark = pytest.mark.django_db  # model checks among them ask the database


def ids(errors):
    return {error.id for error in errors}


def test_an_agent_that_cannot_be_imported_is_runs_e001(settings):
    settings.DEUZ_AGENTS = {"ghost": "demo.agents.no_such_agent"}
    assert "runs.E001" in ids(run_checks())


def test_a_store_backend_that_cannot_be_imported_is_runs_e002(settings):
    settings.DEUZ_STORES = {"sessions": {"BACKEND": "runs.stores.nowhere.Store"}}
    assert "runs.E002" in ids(run_checks())


def test_a_malformed_mcp_server_entry_is_runs_e004(monkeypatch):
    monkeypatch.setenv("DEUZ_MCP_SERVERS", '{"files": {"command": "node", "url": "http://secret-host/mcp"}}')
    [error] = [error for error in run_checks() if error.id == "runs.E004"]
    assert "'files'" in error.msg and "secret-host" not in error.msg


def test_the_shipped_settings_pass(settings):
    assert not ids(run_checks()) & {"runs.E001", "runs.E002"}
