"""Traces (issue 26): OpenTelemetry spans of runs sent over OTLP/HTTP to a receiver in the test, one trace per run
across its legs and processes, named and attributed by the GenAI semantic conventions, without message contents."""

from __future__ import annotations

import signal

import pytest
from opentelemetry import trace

from approvals.models import ApprovalRequest
from observability import tracing
from runs.models import Run
from runs.stores.sessions import DatabaseSessionStore
from tests.factories import REIMBURSE, make_queued_run, verdict
from tests.observability.otlp import TraceReceiver
from tests.processes import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def receiver():
    with TraceReceiver() as receiver:
        yield receiver


@pytest.fixture
def traced(receiver, monkeypatch):
    """This process traces to ``receiver``, as OTEL_EXPORTER_OTLP_ENDPOINT alone asks."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    tracing.tracing_enabled.cache_clear()
    yield receiver
    tracing.tracing_shutdown()
    tracing.tracing_enabled.cache_clear()


@pytest.fixture
def untraced(monkeypatch):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER"):
        monkeypatch.delenv(name, raising=False)
    tracing.tracing_shutdown()
    tracing.tracing_enabled.cache_clear()
    yield
    tracing.tracing_enabled.cache_clear()


def texts_of(run_id: str) -> list[str]:
    """Every text of the run's history (what people and the model said), the tool inputs' values included."""
    texts = []
    for message in DatabaseSessionStore().load(run_id)["messages"]:
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
            continue
        for part in content:
            texts += [part[key] for key in ("text",) if part.get(key)]
            texts += [str(value) for value in (part.get("input") or {}).values()]
    return texts


def test_tracing_is_off_without_an_otel_variable(untraced, drain_runs):
    make_queued_run("off-1")
    drain_runs()
    assert tracing.tracer_provider() is None  # no SDK provider was built
    assert not hasattr(trace.get_tracer_provider(), "force_flush")  # and none installed as the global one
    assert Run.objects.get(run_id="off-1").trace_context is None


def test_the_sdk_is_not_even_imported_with_tracing_off(run_python):
    result = run_python(
        "import django, sys; django.setup(); import runs.execution.legs, runs.execution.worker; "
        "print(sorted(name for name in sys.modules if name.startswith('opentelemetry.sdk')))"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("env", [{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"},
                                 {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}])
def test_tracing_can_be_switched_off_by_the_standard_variables(monkeypatch, env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    tracing.tracing_enabled.cache_clear()
    try:
        assert tracing.tracing_enabled() is False
    finally:
        tracing.tracing_enabled.cache_clear()


def test_a_leg_is_an_invoke_agent_span_over_its_chat_and_tool_spans(traced, drain_runs):
    make_queued_run("span-1")
    drain_runs()
    [leg] = traced.named("invoke_agent ")
    assert leg.name == "invoke_agent reimbursement" and leg.parent_span_id == ""
    assert {key: leg.attributes[key] for key in ("gen_ai.operation.name", "deuz.run_id", "deuz.leg",
                                                 "deuz.owner_epoch")} == {
        "gen_ai.operation.name": "invoke_agent", "deuz.run_id": "span-1", "deuz.leg": 1, "deuz.owner_epoch": 1}
    chats, tools = traced.named("chat "), traced.named("execute_tool ")
    assert [(span.name, span.attributes["deuz.step_index"]) for span in chats] == [
        ("chat deuz-demo-scripted", 0), ("chat deuz-demo-scripted", 1)]
    assert {key: chats[0].attributes[key] for key in (
        "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model",
        "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons")} == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "deuz.scripted",
        "gen_ai.request.model": "deuz-demo-scripted", "gen_ai.response.model": "deuz-demo-scripted",
        "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 40, "gen_ai.response.finish_reasons": ("tool-calls",)}
    [tool] = tools
    call_id = next(part["tool_call_id"] for part in DatabaseSessionStore().load("span-1")["messages"][1]["content"]
                   if part["type"] == "tool_call")
    assert (tool.name, tool.attributes["gen_ai.tool.name"], tool.attributes["gen_ai.tool.call.id"]) == (
        "execute_tool lookup_expense", "lookup_expense", call_id)
    assert {span.parent_span_id for span in chats + tools} == {leg.span_id}
    assert {span.trace_id for span in traced.spans} == {leg.trace_id}


def test_a_suspension_is_an_approval_wait_event(traced, drain_runs):
    make_queued_run("wait-1")
    drain_runs()
    [leg] = traced.named("invoke_agent ")
    assert [name for name, _ in leg.events] == ["deuz.approval.wait"]


def test_the_run_keeps_its_trace_and_its_next_leg_joins_it(traced, drain_runs):
    make_queued_run("join-1")
    drain_runs()
    verdict(ApprovalRequest.objects.get(run__run_id="join-1"))
    drain_runs()
    first, second = sorted(traced.named("invoke_agent "), key=lambda span: span.attributes["deuz.leg"])
    assert Run.objects.get(run_id="join-1").trace_context == f"00-{first.trace_id}-{first.span_id}-03"
    assert (second.trace_id, second.parent_span_id, second.attributes["deuz.leg_kind"]) == (
        first.trace_id, first.span_id, "verdict")
    # The approved payment ran through the effect ledger: its moves are events of the leg that made them.
    moves = [attributes["deuz.effect.to"] for name, attributes in second.events if name == "deuz.effect.transition"]
    assert moves[-1] in ("committed", "verified") and "attempted" in moves


def test_no_message_text_is_exported_by_default(traced, drain_runs):
    make_queued_run("quiet-1")
    drain_runs()
    exported = b"".join(traced.bodies)
    texts = texts_of("quiet-1")
    assert REIMBURSE[0]["content"] in texts and "exp-1042" in texts  # what must not leave, as stored
    assert [text for text in texts if text.encode() in exported] == []


def test_contents_are_exported_when_asked(traced, drain_runs, settings):
    settings.DEUZ_TRACE_CONTENT = True
    make_queued_run("loud-1")
    drain_runs()
    chat = traced.named("chat ")[0]
    assert REIMBURSE[0]["content"] in chat.attributes["gen_ai.input.messages"]
    assert "exp-1042" in traced.named("execute_tool ")[0].attributes["gen_ai.tool.call.arguments"]


def test_a_killed_legs_span_is_recorded_by_its_continuation_in_the_same_trace(receiver, workers):
    """Two real workers: the first is SIGKILLed once the model decided its first step's tool call (checkpointed), the
    second continues the run: it runs that call, then asks the model again."""
    make_queued_run("dead-1")
    otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
    first = workers("a", DEUZ_FAULT="after-model-decision:1", **otel)
    assert first.wait_exit() == -signal.SIGKILL
    second = workers("b", **otel)
    wait_until(lambda: Run.objects.get(run_id="dead-1").status == "suspended", what="the continuation's approval")
    # Both legs' spans, exported by the living worker's batch processor (every 5 s) before it is stopped, so the
    # test does not depend on how quickly a stopped worker flushes.
    wait_until(lambda: len(receiver.named("invoke_agent ")) >= 2, what="both legs' spans", timeout=30)
    second.stop()
    legs = sorted(receiver.named("invoke_agent "), key=lambda span: span.attributes["deuz.leg"])
    assert [(span.attributes["deuz.leg"], span.attributes["deuz.owner_epoch"], span.status_code) for span in legs] == [
        (1, 1, 2), (2, 2, 0)]  # the dead leg carries an error status; its continuation's does not
    dead, alive = legs
    assert dead.status_message == tracing.DEAD_LEG and dead.attributes["deuz.recorded_by_continuation"] is True
    assert alive.parent_span_id == dead.span_id and "deuz.recovery" in [name for name, _ in alive.events]
    assert {span.trace_id for span in receiver.spans} == {dead.trace_id}  # one trace for both processes
    span_ids = {span.span_id for span in receiver.spans}
    assert all(span.parent_span_id in span_ids for span in receiver.spans if span.parent_span_id)  # no orphans
    chat = next(span for span in receiver.named("chat ") if span.attributes["deuz.leg"] == 2)
    assert chat.attributes["gen_ai.usage.output_tokens"] > 0 and chat.attributes["gen_ai.provider.name"]
    tool = next(span for span in receiver.named("execute_tool ") if span.attributes["deuz.leg"] == 2)
    assert tool.attributes["gen_ai.tool.name"] and tool.attributes["gen_ai.tool.call.id"]
    exported = b"".join(receiver.bodies)
    assert [text for text in texts_of("dead-1") if text.encode() in exported] == []


def failing_tool_agent(*, leg=None):
    """One call of a tool that fails quoting its input, then an answer."""
    from runs.agents import AgentDefinition
    from runs.runtime import tool
    from runs.runtime.testing import ScriptedModel

    def charge(tool_input, ctx):
        raise ValueError(f"card {tool_input['card']} refused")

    call = {"content": [{"type": "tool_call", "tool_name": "charge", "input": {"card": "4111-secret-card"}}]}
    return AgentDefinition(name="failing", max_steps=3, model=ScriptedModel([call, {"content": "Sorry."}]),
                           tools={"charge": tool(execute=charge, input_schema={"type": "object"})})


def test_a_failing_tool_is_an_error_span_naming_the_exception_not_its_message(traced, drain_runs, settings):
    settings.DEUZ_AGENTS = {**settings.DEUZ_AGENTS, "failing": f"{__name__}.failing_tool_agent"}
    from runs.services.lifecycle import run_start

    run_start(agent="failing", messages=[{"role": "user", "content": "Pay"}], run_id="fail-1")
    drain_runs()
    [tool] = traced.named("execute_tool ")
    assert (tool.status_code, tool.status_message, tool.attributes["error.type"]) == (2, "ValueError", "ValueError")
    assert b"4111-secret-card" not in b"".join(traced.bodies)


def test_an_exporter_this_service_lacks_is_a_system_check_error(monkeypatch):
    from observability.checks import check_tracing

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "jaeger")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    errors = check_tracing()
    assert [(error.id, error.msg.split(" ")[0]) for error in errors] == [
        ("observability.E001", "OTEL_TRACES_EXPORTER"), ("observability.E001", "OTEL_EXPORTER_OTLP_PROTOCOL")]
