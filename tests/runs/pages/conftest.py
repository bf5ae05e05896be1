"""Fixtures of the page tests (users per role and their browsers are in tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def support(browser_for):
    """Support staff's browser: reads every run, decides nothing."""
    return browser_for("support")
