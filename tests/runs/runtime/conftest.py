"""The runtime's tests are pure: no Django settings, no database. The HTTP provider tests' fixtures are here
because both of their modules (test_provider_http.py, test_provider_http_openai.py) use them."""

from __future__ import annotations

from typing import Any

import pytest

from runs.runtime.providers import aclose_clients
from tests.runs.runtime.local_api import LocalAPI


@pytest.fixture(autouse=True)
def fast_password_hashing():
    """Overrides the project-wide fixture, which needs Django settings; runtime tests hash no passwords."""
    return None


@pytest.fixture
def no_provider_environment(monkeypatch):
    """Keys and base URLs of the machine running the tests must not leak into what is sent."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def serve():
    """Start a LocalAPI with the given replies; every server and pooled client is closed after the test."""
    servers: list[LocalAPI] = []

    def start(*replies: Any) -> LocalAPI:
        api = LocalAPI(*replies).start()
        servers.append(api)
        return api

    yield start
    await aclose_clients()
    for api in servers:
        api.stop()
