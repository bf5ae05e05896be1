"""Fixtures of the retry tests: the demo agents on a local server speaking Anthropic's API, retries without waits."""

from __future__ import annotations

from typing import Any

import pytest

from tests.runs.runtime.local_api import LocalAPI

#: A key the local server receives; it must never reach a run's error, a journal part or a page.
ANTHROPIC_KEY = "sk-ant-api03-TESTONLY-Rt7Yq2Wm9Xc4Vb8Nz1Lk5Hj3Gf6Ds0Pa"


@pytest.fixture
def provider(settings, monkeypatch):
    """Point the demo agents at a LocalAPI answering ``replies`` in order: no SDK retries, no backoff wait
    (a retry is due at once unless the provider's retry-after says otherwise), five attempts."""
    servers: list[LocalAPI] = []
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    settings.DEUZ_DEMO_MODEL = "anthropic:claude-sonnet-4-6"
    settings.DEUZ_MODEL_MAX_RETRIES = 0
    settings.DEUZ_MODEL_RETRY_ATTEMPTS = 5
    settings.DEUZ_MODEL_RETRY_BASE_SECONDS = 0
    settings.DEUZ_MODEL_RETRY_MAX_SECONDS = 300

    def start(*replies: Any) -> LocalAPI:
        api = LocalAPI(*replies).start()
        servers.append(api)
        settings.DEUZ_ANTHROPIC_BASE_URL = api.base_url
        return api

    yield start
    for api in servers:
        api.stop()
