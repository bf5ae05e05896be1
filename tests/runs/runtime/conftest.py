"""The runtime's tests are pure: no Django settings, no database."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def fast_password_hashing():
    """Overrides the project-wide fixture, which needs Django settings; runtime tests hash no passwords."""
    return None
