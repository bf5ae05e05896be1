"""OpenTelemetry traces of runs (issue 26): one trace per run across its legs and processes, its spans named by the
GenAI semantic conventions (``invoke_agent {agent}`` per leg, ``chat {model}`` per model call, ``execute_tool {tool}``
per tool call).

Configured by OpenTelemetry's own variables only, and off unless one names an exporter (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_TRACES_EXPORTER``; ``OTEL_SDK_DISABLED=true`` turns it off again).
Off, the SDK is never imported and a leg does nothing for it: ``leg_trace_open`` answers None and nothing is wrapped.

The run keeps its trace as a W3C traceparent (``Run.trace_context``), written when its first traced leg starts, so a
leg in another process joins the same trace. A leg's span id is derived from the run and the leg's number: a worker
SIGKILLed mid-leg never exports its open span, so the leg that continues the run records the dead one from its stored
Leg row under that very id, and the dead leg's model and tool spans, exported before the kill, have their parent.
Message contents stay out of spans unless ``DEUZ_TRACE_CONTENT`` asks for them.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import json
import logging
import os
import threading
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from django.conf import settings

from observability.providers import model_provider_name
from runs.agents import AgentDefinition
from runs.models import EffectTransition, JournalEntry, Leg, Run
from runs.runtime.redact import redact
from runs.runtime.tool_phase import SubAgentSuspended
from runs.runtime.toolsets import LegTools, Toolset
from runs.runtime.tools import Tool, ToolContext
from runs.secrets.redaction import service_secrets
from runs.services.lifecycle import Claim

__all__ = [
    "LegTrace",
    "leg_trace_end",
    "leg_trace_open",
    "tracer_provider",
    "tracing_configuration_problems",
    "tracing_enabled",
    "tracing_shutdown",
]

logger = logging.getLogger("deuz.tracing")

#: The exporters OTEL_TRACES_EXPORTER may name here (the OTLP one speaks HTTP/protobuf).
EXPORTERS = ("otlp", "console", "none")
#: What the continuation writes on the span of a leg whose process died.
DEAD_LEG = "The worker process died during this leg (its span was recorded by the leg that continued the run)."


def _env(name: str) -> str:
    return os.environ.get(name, "").strip()


@functools.cache
def tracing_enabled() -> bool:
    """Whether this process traces: an exporter is named and the SDK is not disabled (read once per process)."""
    if _env("OTEL_SDK_DISABLED").lower() == "true":
        return False
    exporters = {name.strip().lower() for name in _env("OTEL_TRACES_EXPORTER").split(",") if name.strip()}
    if exporters:
        return exporters != {"none"}
    return bool(_env("OTEL_EXPORTER_OTLP_ENDPOINT") or _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def tracing_configuration_problems() -> list[str]:
    """What in the OTEL_* variables this service cannot honour, each naming its variable (system check
    observability.E001)."""
    problems = []
    for name in _env("OTEL_TRACES_EXPORTER").split(","):
        if name.strip() and name.strip().lower() not in EXPORTERS:
            problems.append(f"OTEL_TRACES_EXPORTER names {name.strip()!r}; this service exports 'otlp' "
                            "(HTTP/protobuf), 'console' or 'none'.")
    for variable in ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        if _env(variable) and _env(variable) != "http/protobuf":
            problems.append(f"{variable} is {_env(variable)!r}; this service sends OTLP over HTTP/protobuf only.")
    return problems


# ------------------------------------------------------------------ the SDK, set up at the first traced leg

_setup_lock = threading.Lock()
_provider: Any = None
_tracer: Any = None


_WANTED_IDS: contextvars.ContextVar[tuple[int | None, int] | None] = contextvars.ContextVar(
    "deuz_wanted_span_ids", default=None)


def _leg_span_ids() -> Any:
    """The SDK's random ids, except where a leg asks for its own (its derived span id, the run's trace id): they
    are passed through a context variable around the one ``start_span`` that takes them."""
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class LegSpanIds(RandomIdGenerator):
        def generate_span_id(self) -> int:
            wanted = _WANTED_IDS.get()
            return wanted[1] if wanted is not None else super().generate_span_id()

        def generate_trace_id(self) -> int:
            wanted = _WANTED_IDS.get()
            if wanted is not None and wanted[0] is not None:
                return wanted[0]  # a run's trace id: random when the run's first leg drew it
            return super().generate_trace_id()

    return LegSpanIds()


def _exporters() -> list[Any]:
    names = [name.strip().lower() for name in _env("OTEL_TRACES_EXPORTER").split(",") if name.strip()] or ["otlp"]
    exporters = []
    if "otlp" in names:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporters.append(OTLPSpanExporter())  # endpoint, headers, timeout, compression: the OTEL_* variables
    if "console" in names:
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        exporters.append(ConsoleSpanExporter())
    return exporters


def _set_up() -> Any:
    """This process's tracer, its provider built on first use (a BatchSpanProcessor per exporter)."""
    global _provider, _tracer
    with _setup_lock:
        if _tracer is None:
            from opentelemetry.sdk.resources import SERVICE_NAME, Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            attributes = {} if _env("OTEL_SERVICE_NAME") else {SERVICE_NAME: "deuz"}
            # Not installed as the global provider: Deuz's spans are its own, whatever else the process runs.
            provider = TracerProvider(resource=Resource.create(attributes), id_generator=_leg_span_ids())
            for exporter in _exporters():
                provider.add_span_processor(BatchSpanProcessor(exporter))
            _provider, _tracer = provider, provider.get_tracer("deuz")
    return _tracer


def tracer_provider() -> Any:
    """The SDK's TracerProvider of this process, or None while nothing was traced (always None with tracing off)."""
    return _provider


def tracing_flush(timeout_millis: int = 10_000) -> None:
    """Export every span ended so far (a leg's end); nothing when the SDK was never set up."""
    if _provider is not None:
        _provider.force_flush(timeout_millis)


def tracing_shutdown() -> None:
    """At a worker's normal stop: export everything, then stop the exporters' threads."""
    global _provider, _tracer
    with _setup_lock:
        provider, _provider, _tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


# ------------------------------------------------------------------ one leg's trace


def leg_span_id(run_id: str, leg: int) -> int:
    """The span id of leg ``leg`` of ``run_id``: the same in every process, never 0."""
    digest = hashlib.sha256(f"{run_id}\x00{leg}".encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


@dataclass
class LegTrace:
    """The spans of one leg: its ``invoke_agent`` span, open while the leg runs, and the model and tool spans under
    it (through ``instrument``)."""

    claim: Claim
    run_id: str
    agent: str
    tracer: Any
    span: Any
    writer: Any = None  # the leg's journal writer: its source's last ``step-start`` part is the step being run
    content: bool = False
    secrets: tuple[str, ...] = ()
    _context: Any = field(default=None, repr=False)

    def base_attributes(self) -> dict[str, Any]:
        return {"deuz.run_id": self.run_id, "deuz.leg": self.claim.leg, "deuz.owner_epoch": self.claim.epoch}

    def child(self, name: str, *, kind: Any = None, attributes: dict[str, Any]) -> Any:
        from opentelemetry import trace

        if self._context is None:
            self._context = trace.set_span_in_context(self.span)
        return self.tracer.start_span(name, context=self._context, kind=kind or trace.SpanKind.INTERNAL,
                                      attributes={**self.base_attributes(), **attributes})

    def step_index(self) -> int | None:
        """The step whose model is being called: the engine emits ``step-start`` just before it calls the model."""
        source = getattr(self.writer, "source", None)
        if source is None:
            return None
        count = source.parts_count()
        for part in reversed(source.parts_from(max(count - 16, 0))):
            if part.get("type") == "step-start":
                return part.get("step_index")
        return None

    def instrument(self, definition: AgentDefinition) -> AgentDefinition:
        """The leg's agent with its model and tools traced."""
        model = _TracedModel(definition.model, self)
        self.span.set_attributes({"gen_ai.provider.name": model.provider, "gen_ai.request.model": model.model_id})
        return replace(definition, model=model, tools=_traced_tools(definition.tools, self))

    def event(self, name: str, attributes: dict[str, Any] | None = None, *, at: datetime | None = None) -> None:
        self.span.add_event(name, attributes or {}, timestamp=_ns(at) if at is not None else None)

    def end(self, *, finish_reason: str, error: str, usage: dict[str, Any]) -> None:
        """Close the leg's span (on the ORM's thread: it reads the leg's ledger transitions)."""
        from opentelemetry.trace import Status, StatusCode

        span = self.span
        _effect_events(span, self.run_id, self.claim.epoch)
        if finish_reason == "suspended":
            span.add_event("deuz.approval.wait", {"deuz.step_index": _run_step(self.run_id)})
        elif finish_reason == "retry":
            span.add_event("deuz.retry.scheduled", {"deuz.retry.reason": error})
        span.set_attributes({
            "gen_ai.response.finish_reasons": (finish_reason,),
            "gen_ai.usage.input_tokens": int(usage.get("input_tokens") or 0),
            "gen_ai.usage.output_tokens": int(usage.get("output_tokens") or 0),
            "deuz.finish_reason": finish_reason,
        })
        if finish_reason in ("error", "needs_review"):
            span.set_status(Status(StatusCode.ERROR, redact(error, self.secrets)))
        span.end()


def _run_step(run_id: str) -> int:
    return Run.objects.filter(run_id=run_id).values_list("step_index", flat=True).first() or 0


def _effect_events(span: Any, run_id: str, epoch: int) -> None:
    """The effect ledger's moves under ``epoch`` as events of its leg's span (one read at the leg's end)."""
    moves = (EffectTransition.objects.filter(effect__run__run_id=run_id, owner_epoch=epoch)
             .order_by("id").values_list("at", "from_status", "to_status", "via", "effect__tool_name",
                                         "effect__tool_call_id"))
    for at, before, after, via, tool_name, tool_call_id in moves:
        span.add_event("deuz.effect.transition", {
            "deuz.effect.from": before or "", "deuz.effect.to": after, "deuz.effect.via": via,
            "gen_ai.tool.name": tool_name, "gen_ai.tool.call.id": tool_call_id,
        }, timestamp=_ns(at))


def _wanted(trace_id: int | None, span_id: int, start: Any) -> Any:
    """``start()`` with the ids its span is to have."""
    token = _WANTED_IDS.set((trace_id, span_id))
    try:
        return start()
    finally:
        _WANTED_IDS.reset(token)


def leg_trace_open(claim: Claim, run: Run, *, writer: Any = None) -> LegTrace | None:
    """The trace of the leg ``claim`` starts, or None when tracing is off (on the ORM's thread: it may write the run's
    traceparent and record the dead leg this one continues)."""
    if not tracing_enabled():
        return None
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    tracer = _set_up()
    name = f"invoke_agent {run.agent}"
    attributes = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": run.agent, "deuz.run_id": run.run_id,
        "deuz.leg": claim.leg, "deuz.leg_kind": claim.kind, "deuz.owner_epoch": claim.epoch,
    }
    propagator = TraceContextTextMapPropagator()
    stored = run.trace_context or None
    if stored is None:
        own_id = leg_span_id(run.run_id, claim.leg)
        span = _wanted(None, own_id, lambda: tracer.start_span(name, context=Context(), attributes=attributes))
        carrier: dict[str, str] = {}
        propagator.inject(carrier, context=trace.set_span_in_context(span))
        traceparent = carrier.get("traceparent", "")
        Run.objects.filter(pk=run.pk, trace_context__isnull=True).update(trace_context=traceparent)
        run.trace_context = traceparent
    else:
        parent = propagator.extract({"traceparent": stored})
        root = trace.get_current_span(parent).get_span_context()
        if claim.kind == Leg.Kind.RECOVERY:
            _record_dead_leg(run, claim.leg - 1, tracer, parent, root)
        span = _wanted(None, leg_span_id(run.run_id, claim.leg),
                       lambda: tracer.start_span(name, context=parent, attributes=attributes))
        if claim.kind == Leg.Kind.RECOVERY:
            span.add_event("deuz.recovery", {"deuz.dead_leg": claim.leg - 1})
    if claim.kind == Leg.Kind.VERDICT:
        span.add_event("deuz.approval.resumed")
    return LegTrace(claim=claim, run_id=run.run_id, agent=run.agent, tracer=tracer, span=span, writer=writer,
                    content=bool(getattr(settings, "DEUZ_TRACE_CONTENT", False)), secrets=service_secrets())


def _record_dead_leg(run: Run, number: int, tracer: Any, parent: Any, root: Any) -> None:
    """The span of leg ``number`` if its process died (it never ended): from its Leg row, its start to its last
    journal write, with an error status saying so. The run's first leg is the trace's root."""
    from opentelemetry.context import Context
    from opentelemetry.trace import Status, StatusCode

    dead = Leg.objects.filter(run=run, number=number, ended_at__isnull=True).first()
    if dead is None:
        return
    last = (JournalEntry.objects.filter(run=run, owner_epoch=dead.owner_epoch).order_by("-id")
            .values_list("created_at", flat=True).first()) or dead.started_at
    span_id = leg_span_id(run.run_id, number)
    is_root = span_id == root.span_id
    attributes = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": run.agent, "deuz.run_id": run.run_id,
        "deuz.leg": number, "deuz.leg_kind": dead.kind, "deuz.owner_epoch": dead.owner_epoch,
        "deuz.worker_id": dead.worker_id, "deuz.recorded_by_continuation": True,
    }
    span = _wanted(root.trace_id if is_root else None, span_id, lambda: tracer.start_span(
        f"invoke_agent {run.agent}", context=Context() if is_root else parent, attributes=attributes,
        start_time=_ns(dead.started_at)))
    _effect_events(span, run.run_id, dead.owner_epoch)
    span.set_status(Status(StatusCode.ERROR, DEAD_LEG))
    span.end(end_time=max(_ns(last), _ns(dead.started_at)))
    # Exported now, not at this leg's end: should this process die too, the dead leg is not lost twice.
    threading.Thread(target=tracing_flush, name="deuz-trace-flush", daemon=True).start()


async def leg_trace_end(leg_trace: LegTrace | None, *, finish_reason: str, error: str, usage: dict[str, Any]) -> None:
    """End the leg's span and export the leg's spans (never fails the leg)."""
    if leg_trace is None:
        return
    import asyncio

    from asgiref.sync import sync_to_async

    try:
        await sync_to_async(leg_trace.end)(finish_reason=finish_reason, error=error, usage=usage or {})
        await asyncio.to_thread(tracing_flush)
    except Exception as exc:  # tracing is for operators: it never changes a run
        logger.warning("Ending the trace of leg %d of %s failed (%s).", leg_trace.claim.leg, leg_trace.run_id,
                       type(exc).__name__)


# ------------------------------------------------------------------ the model and the tools, wrapped


class _TracedModel:
    """The leg's model, each call a ``chat {model}`` span (any other attribute is the model's own)."""

    def __init__(self, model: Any, leg_trace: LegTrace) -> None:
        self._model = model
        self._trace = leg_trace
        self.model_id = model.model_id
        self.provider = model_provider_name(model)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    async def stream(self, request: dict[str, Any]) -> Any:
        from opentelemetry.trace import SpanKind

        leg_trace = self._trace
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.model_id,
        }
        step = leg_trace.step_index()
        if step is not None:
            attributes["deuz.step_index"] = step
        if leg_trace.content:
            attributes["gen_ai.input.messages"] = _content(request.get("messages"), leg_trace.secrets)
        span = leg_trace.child(f"chat {self.model_id}", kind=SpanKind.CLIENT, attributes=attributes)
        text: list[str] = []
        calls: list[dict[str, Any]] = []
        try:
            async for event in self._model.stream(request):
                kind = event.get("type")
                if kind == "finish":
                    usage = event.get("usage") or {}
                    span.set_attributes({
                        "gen_ai.response.model": event.get("model") or self.model_id,
                        "gen_ai.usage.input_tokens": int(usage.get("input_tokens") or 0),
                        "gen_ai.usage.output_tokens": int(usage.get("output_tokens") or 0),
                        "gen_ai.response.finish_reasons": (event.get("finish_reason") or
                                                           ("tool-calls" if calls else "stop"),),
                    })
                elif leg_trace.content and kind == "text-delta":
                    text.append(event.get("text", ""))
                elif kind == "tool-call":
                    calls.append({"id": event.get("tool_call_id"), "name": event.get("tool_name"),
                                  **({"arguments": event.get("input")} if leg_trace.content else {})})
                yield event
        except Exception as exc:
            _failed(span, exc, leg_trace)
            raise
        finally:
            if leg_trace.content:
                span.set_attribute("gen_ai.output.messages", _content(
                    [{"role": "assistant", "text": "".join(text), "tool_calls": calls}], leg_trace.secrets))
            span.end()


def _failed(span: Any, exc: Exception, leg_trace: LegTrace) -> None:
    """An error status on ``span``: the exception's class, and its message only where contents are recorded (a
    tool's error may quote what it was given)."""
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", type(exc).__name__)
    description = redact(str(exc), leg_trace.secrets)[:500] if leg_trace.content else type(exc).__name__
    span.set_status(Status(StatusCode.ERROR, description))


def _content(value: Any, secrets: tuple[str, ...]) -> str:
    return redact(json.dumps(value, default=str, ensure_ascii=False), secrets)


@dataclass(frozen=True, kw_only=True)
class _TracedTool(Tool):
    """A tool whose calls are ``execute_tool {tool}`` spans (through the effect ledger for an effectful one)."""

    leg_trace: Any = field(default=None, repr=False, compare=False)

    async def run(self, tool_input: dict[str, Any], ctx: ToolContext) -> Any:
        leg_trace = self.leg_trace
        attributes = {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": ctx.tool_name,
            "gen_ai.tool.call.id": ctx.tool_call_id, "gen_ai.tool.type": "function", "deuz.step_index": ctx.step_index,
        }
        if self.effect is not None:
            attributes["deuz.effectful"] = True
        if leg_trace.content:
            attributes["gen_ai.tool.call.arguments"] = _content(tool_input, leg_trace.secrets)
        span = leg_trace.child(f"execute_tool {ctx.tool_name}", attributes=attributes)
        try:
            output = await super().run(tool_input, ctx)
        except SubAgentSuspended:  # the sub-agent waits for a person: no failure
            span.add_event("deuz.approval.wait")
            raise
        except Exception as exc:
            _failed(span, exc, leg_trace)
            raise
        else:
            if leg_trace.content:
                span.set_attribute("gen_ai.tool.call.result", _content(output, leg_trace.secrets))
            return output
        finally:
            span.end()


_TOOL_FIELDS = tuple(item.name for item in fields(Tool) if item.init)


def _traced_tool(item: Any, leg_trace: LegTrace) -> Any:
    if item is None or isinstance(item, _TracedTool) or not isinstance(item, Tool) or item.is_client_tool:
        return item
    return _TracedTool(**{name: getattr(item, name) for name in _TOOL_FIELDS}, leg_trace=leg_trace)


class _TracedToolset:
    """A toolset (an MCP server's) whose listed tools are traced."""

    def __init__(self, toolset: Any, leg_trace: LegTrace) -> None:
        self._toolset = toolset
        self._trace = leg_trace

    async def list_tools(self) -> LegTools:
        return _traced_tools(await self._toolset.list_tools(), self._trace)


def _traced_item(item: Any, leg_trace: LegTrace) -> Any:
    if not isinstance(item, Tool) and isinstance(item, Toolset):
        return _TracedToolset(item, leg_trace)
    return _traced_tool(item, leg_trace)


def _traced_tools(tools: Any, leg_trace: LegTrace) -> Any:
    """``tools`` in the same shape (a dict, a list, a toolset, a leg's listed tools), each tool traced."""
    if not tools:
        return tools
    if isinstance(tools, LegTools):
        stand_ins = [lambda name, find=find: _traced_tool(find(name), leg_trace) for find in tools.stand_ins]
        return LegTools({name: _traced_tool(item, leg_trace) for name, item in tools.items()}, stand_ins=stand_ins)
    if isinstance(tools, dict):
        return {name: _traced_item(item, leg_trace) for name, item in tools.items()}
    if isinstance(tools, (list, tuple)):
        return [_traced_item(item, leg_trace) for item in tools]
    return _traced_item(tools, leg_trace)
