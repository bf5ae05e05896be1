"""Agents for the retry tests, registered through the settings fixture (DEUZ_AGENTS)."""

from __future__ import annotations

import dataclasses

from runs.agents import AgentDefinition, LegContext
from demo.agents import reimbursement_agent
from runs.agents.retries import RetryPolicy


def impatient_agent(*, leg: LegContext | None = None) -> AgentDefinition:
    """The demo reimbursement agent with a policy of its own: one retry, at once."""
    policy = RetryPolicy(attempts=1, base_seconds=0)
    return dataclasses.replace(reimbursement_agent(leg=leg), name="impatient", retry=policy)
