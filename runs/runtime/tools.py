"""Tools: what the model may call, whether a call needs approval, and what it gets to run with.

A call's input is checked against the tool's ``input_schema`` (JSON Schema, with the ``jsonschema`` package)
before any approval is asked or anything runs: an invalid one is an ``is_error`` result naming the fields, so the
model can correct itself, and never reaches a reviewer or the outside world.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from jsonschema.validators import validator_for

from .effects import Effect, EffectCall, business_operation_id, effect_fingerprint, perform_effect

if TYPE_CHECKING:
    from .deps import Deps
    from .stores import SessionStore

__all__ = ["Effect", "LegTools", "Tool", "ToolContext", "normalize_tools", "tool"]

Execute = Callable[[dict[str, Any], "ToolContext"], Any]
NeedsApproval = bool | Callable[[dict[str, Any]], bool]


@dataclass(frozen=True, kw_only=True)
class Tool:
    """A tool the model may call. Without ``execute`` it is a client tool: the loop suspends for its result.
    With ``effect`` its calls go through the effect ledger (runs.runtime.effects): at most once per operation."""

    name: str | None = None
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    execute: Execute | None = None
    needs_approval: NeedsApproval = False
    effect: Effect | None = None
    _validator: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.effect is not None and not isinstance(self.effect, Effect):
            raise TypeError(f"effect must be an Effect, not a {type(self.effect).__name__}.")
        if self.effect is not None and self.execute is None:
            raise ValueError("An effectful tool needs an execute: a client tool's effect is the client's business.")

    @property
    def is_client_tool(self) -> bool:
        return self.execute is None

    async def requires_approval(self, tool_input: dict[str, Any]) -> bool:
        if callable(self.needs_approval):
            verdict = self.needs_approval(tool_input)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            return bool(verdict)
        return bool(self.needs_approval)

    def input_problem(self, tool_input: Any) -> str | None:
        """Why ``tool_input`` does not match ``input_schema``, naming each field, or None when it does."""
        validator = self._validator
        if validator is None:
            validator = validator_for(self.input_schema)(self.input_schema)
            object.__setattr__(self, "_validator", validator)  # built once per tool
        problems = []
        for error in sorted(validator.iter_errors(tool_input), key=lambda error: list(map(str, error.path))):
            where = ".".join(str(step) for step in error.absolute_path)
            message = _shortened(error.message)
            problems.append(f"{where}: {message}" if where else message)
        if not problems:
            return None
        return f"The input does not match the tool's input schema: {'; '.join(problems[:10])}."

    def business_operation_id(self, tool_name: str, tool_input: dict[str, Any]) -> str | None:
        """The id of the business operation a call of this tool would be (``Effect(operation_key=...)``), or None:
        an approval request names it, so people see what it would do before they decide. A key function that
        fails answers None here; the call itself then fails with its error."""
        operation_key = self.effect.operation_key if self.effect is not None else None
        if operation_key is None:
            return None
        try:
            key = operation_key(tool_input)
        except Exception:
            return None
        return business_operation_id(tool_name, key) if isinstance(key, str) and key else None

    def fingerprint_of(self, tool_name: str, tool_input: dict[str, Any]) -> str:
        """The digest that identifies a request of this tool (``effect.fingerprint`` picks what counts)."""
        picked = tool_input
        if self.effect is not None and self.effect.fingerprint is not None:
            picked = self.effect.fingerprint(tool_input)
        return effect_fingerprint(tool_name, picked)

    async def run(self, tool_input: dict[str, Any], ctx: ToolContext) -> Any:
        """Call the tool: an effectful one through the effect ledger, any other one directly."""
        if self.effect is not None:
            return await perform_effect(self, tool_input, ctx)
        return await self.call_execute(tool_input, ctx)

    async def call_execute(self, tool_input: dict[str, Any], ctx: ToolContext) -> Any:
        """Call ``execute``; a sync function runs in a thread so it can block (or use a sync ORM) freely."""
        assert self.execute is not None
        if inspect.iscoroutinefunction(self.execute):
            return await self.execute(tool_input, ctx)
        result = await asyncio.to_thread(self.execute, tool_input, ctx)
        if inspect.isawaitable(result):
            result = await result
        return result

    def spec(self) -> dict[str, Any]:
        """What the model is told about this tool."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


#: How much of one schema error a message keeps: jsonschema quotes the offending value, which may be huge.
_MAX_PROBLEM_CHARS = 200


def _shortened(message: str) -> str:
    """A schema error within _MAX_PROBLEM_CHARS: its start (where the value is quoted) and its end (what was
    expected), cut in the middle."""
    if len(message) <= _MAX_PROBLEM_CHARS:
        return message
    return f"{message[:80]} … {message[-100:]}"


def tool(
    *,
    name: str | None = None,
    description: str = "",
    input_schema: dict[str, Any] | None = None,
    execute: Execute | None = None,
    needs_approval: NeedsApproval = False,
    effect: Effect | None = None,
) -> Tool:
    """A ``Tool``; ``effect=Effect(reconcile=..., verify=..., fingerprint=...)`` makes it effectful."""
    return Tool(
        name=name,
        description=description,
        input_schema=input_schema if input_schema is not None else {"type": "object", "properties": {}},
        execute=execute,
        needs_approval=needs_approval,
        effect=effect,
    )


class LegTools(dict):
    """``{name: Tool}`` offered to the model, plus stand-ins the engine finds with ``get`` for calls of tools
    that are not offered this leg (a tool gone since an earlier leg, a server unreachable now): such a call gets an
    ``is_error`` result saying why instead of "Unknown tool"; the model never sees the stand-ins."""

    def __init__(self, *args: Any, stand_ins: Iterable[Any] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stand_ins = list(stand_ins)  # callables name -> Tool | None, asked in order

    def get(self, name: Any, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def __missing__(self, name: Any) -> Tool:
        for stand_in in self.stand_ins:
            found = stand_in(name)
            if found is not None:
                return found
        raise KeyError(name)


def normalize_tools(tools: Mapping[str, Tool] | Iterable[Tool] | None) -> dict[str, Tool]:
    """``{name: Tool}`` from a dict (its keys are the names) or a list of named tools."""
    if tools is None:
        return {}
    if isinstance(tools, LegTools):
        return tools  # listed for this leg (runs.runtime.toolsets): named already, with its stand-ins
    if isinstance(tools, Mapping):
        named = {}
        for key, item in tools.items():
            if not isinstance(item, Tool):
                raise TypeError(f"Tool {key!r} is a {type(item).__name__}, not a Tool.")
            named[key] = item if item.name == key else replace(item, name=key)
        return named
    named = {}
    for item in tools:
        if not isinstance(item, Tool) or not item.name:
            raise TypeError("A list of tools needs Tool objects that each have a name.")
        if item.name in named:
            raise ValueError(f"Two tools are named {item.name!r}.")
        named[item.name] = item
    return named


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """What a tool's ``execute`` receives besides its input."""

    tool_call_id: str
    tool_name: str
    run_id: str | None
    step_index: int
    messages: list[dict[str, Any]]
    agent_path: tuple[str, ...]
    deps: Deps
    signal: asyncio.Event | None
    # Durability and approval settings a sub-agent inherits from its parent.
    store: SessionStore | None = None
    root_run_id: str | None = None
    approval_responses: tuple[dict[str, Any], ...] = ()
    approve_tool_call: Callable[[dict[str, Any]], Any] | None = None
    approval_signer: Any = None
    approval_max_age_ms: int | None = None
    report_usage: Callable[[Mapping[str, Any]], None] = lambda usage: None
    # The effect ledger (inherited by sub-agents); the approval that authorized this call, bound to its exact
    # request ({"approval_id", "tool_name", "input", "revision"}), or why it was not authorized; and, inside an
    # effectful tool's execute, the operation (its operation_id is the idempotency key to pass on).
    effect_ledger: Any = None
    settling: bool = False  # this call runs while its step's suspension is settled (its verdicts were asked for)
    approval: Mapping[str, Any] | None = None
    denial: str | None = None
    effect: EffectCall | None = None
    # The leg's stream: a sub-agent tool emits its own parts into its parent's stream here (engine tags them with
    # their agent_path).
    emit: Callable[[dict[str, Any]], None] = lambda part: None
