"""The agent registry and the demo agents' model choice."""

from __future__ import annotations

import pytest

from runs.agents import agent_build
from runs.errors import UnknownAgent
from runs.runtime.providers import AnthropicModel, OpenAIChatModel
from runs.runtime.testing import ScriptedModel


def test_the_demo_agents_run_on_the_scripted_model_by_default():
    assert isinstance(agent_build("reimbursement").model, ScriptedModel)


def test_an_anthropic_demo_model_is_used_when_configured(settings, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    settings.DEUZ_DEMO_MODEL = "anthropic:claude-sonnet-4-6"
    model = agent_build("reimbursement").model
    assert isinstance(model, AnthropicModel) and model.model_id == "claude-sonnet-4-6"


def test_an_openai_demo_model_is_used_when_configured(settings, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings.DEUZ_DEMO_MODEL = "openai:gpt-5-mini"
    assert isinstance(agent_build("coder").model, OpenAIChatModel)


def test_an_unknown_agent_is_refused():
    with pytest.raises(UnknownAgent):
        agent_build("nobody")


def test_the_coder_agents_shell_needs_approval_inside_its_sub_agent():
    definition = agent_build("coder")
    assert list(definition.tools) == ["coder"] and definition.approve_tool_call is None
