"""deuz_project.database_url: this process's database as a URL another process can open."""

from __future__ import annotations

from types import SimpleNamespace

import dj_database_url
import pytest

import deuz_project.database_url as module


def _as(monkeypatch, vendor, **config):
    monkeypatch.setattr(module, "connection", SimpleNamespace(vendor=vendor, settings_dict=config))


def test_a_postgresql_url_round_trips_a_password_with_url_characters(monkeypatch):
    _as(monkeypatch, "postgresql", NAME="deuz", USER="ada", PASSWORD="p@ss/w:rd", HOST="db.example", PORT=5433)
    parsed = dj_database_url.parse(module.database_url())
    assert (parsed["USER"], parsed["PASSWORD"], parsed["HOST"], parsed["PORT"], parsed["NAME"]) == (
        "ada", "p@ss/w:rd", "db.example", 5433, "deuz")


def test_an_in_memory_sqlite_database_is_refused_with_the_reason(monkeypatch):
    _as(monkeypatch, "sqlite", NAME="file:memorydb_default?mode=memory&cache=shared")
    with pytest.raises(ValueError, match="in-memory"):
        module.database_url()


def test_a_sqlite_file_is_named_by_its_path(monkeypatch):
    _as(monkeypatch, "sqlite", NAME="/tmp/deuz.sqlite3")
    assert module.database_url() == "sqlite:////tmp/deuz.sqlite3"
