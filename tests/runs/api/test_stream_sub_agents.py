"""A sub-agent's parts are in its parent's stream, each with its agent_path: the coder demo hands the work to its
``coder`` sub-agent, whose text, run_shell call, verdict and result a follower of the parent run reads."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from tests.factories import make_queued_run, verdict
from tests.streams import follow, seqs

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def coder_run(drain_runs, owner, reviewer):
    """The coder demo through its sub-agent's approved run_shell to its end; returns the SSE events."""
    make_queued_run("code-1", agent="coder", user=owner)
    drain_runs()
    verdict(ApprovalRequest.objects.get(run__run_id="code-1"), user=reviewer)
    drain_runs()
    return follow(owner, "code-1")


def sub_agent_parts(events):
    return [event["data"] for event in events if event["id"] is not None and "agent_path" in event["data"]]


def test_the_sub_agents_text_is_in_the_parents_stream_with_its_agent_path(coder_run):
    text = "".join(part["text"] for part in sub_agent_parts(coder_run) if part["type"] == "text-delta")
    assert "Running the test suite in the sandbox." in text
    assert {tuple(part["agent_path"]) for part in sub_agent_parts(coder_run)} == {("coder",)}


def test_the_sub_agents_run_shell_call_verdict_and_result_are_in_the_parents_stream(coder_run):
    told = [(part["type"], part.get("tool_name")) for part in sub_agent_parts(coder_run)
            if part["type"] in ("tool-call", "tool-approval-verdict", "tool-result")]
    assert told == [("tool-call", "run_shell"), ("tool-approval-verdict", None), ("tool-result", "run_shell")]


def test_the_parents_own_parts_carry_no_agent_path(coder_run):
    own = [event["data"] for event in coder_run if event["id"] is not None and "agent_path" not in event["data"]]
    assert ("tool-call", "coder") in [(part["type"], part.get("tool_name")) for part in own]
    assert own[-1]["type"] == "finish"


def test_the_stream_with_sub_agent_parts_stays_gapless(coder_run):
    assert seqs(coder_run) == list(range(len(seqs(coder_run))))
