"""The real-model settings: read from the environment, validated at start-up, handed to the demo agents' model."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ImproperlyConfigured

from deuz_project.env import env_demo_model, env_float, env_headers, env_optional_int, env_url
from runs.agents import agent_build
from runs.runtime.providers import AnthropicModel, OpenAIChatModel

SHOW_MODEL_SETTINGS = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps({name: getattr(settings, name) for name in [
    "DEUZ_DEMO_MODEL", "DEUZ_OPENAI_BASE_URL", "DEUZ_ANTHROPIC_BASE_URL", "DEUZ_MODEL_TIMEOUT_SECONDS",
    "DEUZ_MODEL_MAX_RETRIES", "DEUZ_MODEL_MAX_TOKENS", "DEUZ_MODEL_TEMPERATURE", "DEUZ_MODEL_EXTRA_HEADERS",
    "DEUZ_ANTHROPIC_PROMPT_CACHING", "DEUZ_OPENAI_STREAM_USAGE",
]}))
"""


def test_the_model_settings_are_read_from_the_environment_at_start_up(run_python):
    result = run_python(
        SHOW_MODEL_SETTINGS,
        DEUZ_DEMO_MODEL="openai:llama3.1:8b",
        OPENAI_BASE_URL="http://localhost:11434/v1",  # local: no OPENAI_API_KEY needed
        DEUZ_MODEL_TIMEOUT_SECONDS="45.5",
        DEUZ_MODEL_MAX_RETRIES="0",
        DEUZ_MODEL_MAX_TOKENS="2048",
        DEUZ_MODEL_EXTRA_HEADERS='{"X-Team": "payments"}',
        DEUZ_OPENAI_STREAM_USAGE="off",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "DEUZ_DEMO_MODEL": "openai:llama3.1:8b",
        "DEUZ_OPENAI_BASE_URL": "http://localhost:11434/v1",
        "DEUZ_ANTHROPIC_BASE_URL": None,
        "DEUZ_MODEL_TIMEOUT_SECONDS": 45.5,
        "DEUZ_MODEL_MAX_RETRIES": 0,
        "DEUZ_MODEL_MAX_TOKENS": 2048,
        "DEUZ_MODEL_TEMPERATURE": None,
        "DEUZ_MODEL_EXTRA_HEADERS": {"X-Team": "payments"},
        "DEUZ_ANTHROPIC_PROMPT_CACHING": True,
        "DEUZ_OPENAI_STREAM_USAGE": False,
    }


def test_a_malformed_model_setting_stops_start_up_naming_it(run_python):
    result = run_python(SHOW_MODEL_SETTINGS, DEUZ_MODEL_EXTRA_HEADERS="X-Team: payments")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and "DEUZ_MODEL_EXTRA_HEADERS" in result.stderr


@pytest.mark.parametrize(
    ("reader", "value"),
    [
        (lambda: env_float("DEUZ_MODEL_TIMEOUT_SECONDS", default=None, positive=True), "soon"),
        (lambda: env_float("DEUZ_MODEL_TIMEOUT_SECONDS", default=None, positive=True), "0"),
        (lambda: env_float("DEUZ_MODEL_TIMEOUT_SECONDS", default=None, positive=True), "nan"),
        (lambda: env_optional_int("DEUZ_MODEL_TIMEOUT_SECONDS", minimum=1), "0"),
        (lambda: env_headers("DEUZ_MODEL_TIMEOUT_SECONDS"), '{"X-Retries": 3}'),
        (lambda: env_url("DEUZ_MODEL_TIMEOUT_SECONDS"), "localhost:11434/v1"),
    ],
)
def test_bad_values_name_their_variable(monkeypatch, reader, value):
    monkeypatch.setenv("DEUZ_MODEL_TIMEOUT_SECONDS", value)
    with pytest.raises(ImproperlyConfigured, match="DEUZ_MODEL_TIMEOUT_SECONDS"):
        reader()


def test_unset_optional_model_settings_are_none(monkeypatch):
    monkeypatch.delenv("DEUZ_MODEL_MAX_TOKENS", raising=False)
    assert (env_optional_int("DEUZ_MODEL_MAX_TOKENS", minimum=1), env_url("DEUZ_MODEL_MAX_TOKENS")) == (None, None)


def test_a_remote_demo_model_without_its_key_is_refused(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://gateway.example.com")
    monkeypatch.setenv("DEUZ_DEMO_MODEL", "anthropic:claude-sonnet-4-6")
    with pytest.raises(ImproperlyConfigured, match="ANTHROPIC_API_KEY"):
        env_demo_model("DEUZ_DEMO_MODEL")


def test_a_demo_model_on_a_local_server_needs_no_key(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:8080")
    monkeypatch.setenv("DEUZ_DEMO_MODEL", "anthropic:claude-sonnet-4-6")
    assert env_demo_model("DEUZ_DEMO_MODEL") == "anthropic:claude-sonnet-4-6"


def test_the_demo_agents_anthropic_model_takes_the_model_settings(settings, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-settings")
    settings.DEUZ_DEMO_MODEL = "anthropic:claude-sonnet-4-6"
    settings.DEUZ_ANTHROPIC_BASE_URL = "https://gateway.example.com"
    settings.DEUZ_MODEL_TIMEOUT_SECONDS = 30.0
    settings.DEUZ_MODEL_MAX_RETRIES = 4
    settings.DEUZ_MODEL_MAX_TOKENS = 16000
    settings.DEUZ_MODEL_EXTRA_HEADERS = {"X-Team": "payments"}
    settings.DEUZ_ANTHROPIC_PROMPT_CACHING = False
    model = agent_build("reimbursement").model
    assert isinstance(model, AnthropicModel)
    assert (model.base_url, model.max_tokens, model.extra_headers, model.prompt_caching) == (
        "https://gateway.example.com", 16000, {"X-Team": "payments"}, False,
    )
    assert (model.client.timeout, model.client.max_retries) == (30.0, 4)


def test_the_demo_agents_openai_model_reaches_a_local_server_without_a_key(settings, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings.DEUZ_DEMO_MODEL = "openai:llama3.1:8b"
    settings.DEUZ_OPENAI_BASE_URL = "http://localhost:11434/v1"
    settings.DEUZ_OPENAI_STREAM_USAGE = False
    model = agent_build("coder").model
    assert isinstance(model, OpenAIChatModel)
    assert (model.model_id, model.base_url, model.is_keyless, model.include_usage) == (
        "llama3.1:8b", "http://localhost:11434/v1", True, False,
    )
