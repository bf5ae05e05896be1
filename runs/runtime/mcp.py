"""MCP tools: the tools of a Model Context Protocol server (official ``mcp`` package), listed as each leg starts.

``mcp_server(...)`` describes a server (stdio with ``command``, streamable HTTP with ``url``; ``mcp_server(name)``
alone reads the ``DEUZ_MCP_SERVERS`` environment variable) and ``mcp_tools(server, ...)`` is a toolset
(runs.runtime.toolsets). Defaults come from the tool annotations: ``readOnlyHint: true`` runs freely; any other
tool needs approval and goes through the effect ledger, where an unknown outcome needs review (a server cannot be
asked what happened) unless ``idempotentHint: true``: then the "reconciliation" is calling it again with the same
input. ``trust_annotations=False`` gates and ledgers every tool.

Sessions: one per server and event loop, owned by one long-lived task of that loop (the client's anyio cancel
scopes must be entered and left in one task), which the legs talk to through a queue; it ends when the loop ends
(its tasks are cancelled) or at ``aclose_mcp_sessions()``. Errors only ever name the server: never its command,
arguments, URL, headers or environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .effects import Effect, EffectCall
from .redact import redact
from .tools import LegTools, NeedsApproval, Tool, ToolContext

__all__ = [
    "MCPServerSpec",
    "MCPServerUnreachable",
    "MCPToolset",
    "MCP_SERVERS_ENV",
    "aclose_mcp_sessions",
    "mcp_server",
    "mcp_servers_problems",
    "mcp_tools",
]

MCP_SERVERS_ENV = "DEUZ_MCP_SERVERS"
#: Seconds to connect (start the process or reach the URL and finish the handshake), to answer a listing before a
#: call, and for one list or call: nothing waits on a server forever (never a stuck run).
CONNECT_TIMEOUT_SECONDS = 20.0
PING_TIMEOUT_SECONDS = 5.0
CALL_TIMEOUT_SECONDS = 120.0

logger = logging.getLogger("deuz.runtime.mcp")

#: JSON-RPC errors that mean the server refused the request (unknown tool, bad arguments): nothing was done.
_REFUSALS = frozenset({-32601, -32602})


class MCPServerUnreachable(RuntimeError):
    """The server could not be reached before a call: nothing was sent, so the call is a plain failure."""


class MCPConnectionLost(ConnectionError):
    """The server went away while a call was in flight: its outcome is unknown (the ledger's default rule)."""


class MCPCallTimedOut(TimeoutError):
    """A call got no answer in time: its outcome is unknown."""


class MCPToolError(RuntimeError):
    """The server answered the call with an error (``isError``), or refused it."""


@dataclass(frozen=True, kw_only=True)
class MCPServerSpec:
    """How to reach one MCP server. Its repr and every error name only ``name``."""

    name: str
    command: str | None = field(default=None, repr=False)
    args: tuple[str, ...] = field(default=(), repr=False)
    env: tuple[tuple[str, str], ...] | None = field(default=None, repr=False)
    url: str | None = field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] | None = field(default=None, repr=False)
    trust_annotations: bool = True

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every configured value, so a message that somehow carries one can be redacted of it."""
        values = [self.command or "", *self.args, self.url or ""]
        values += [value for _, value in self.env or ()] + [value for _, value in self.headers or ()]
        return tuple(value for value in values if len(value) >= 4)


def mcp_server(
    name: str,
    *,
    command: str | None = None,
    args: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
    trust_annotations: bool = True,
) -> MCPServerSpec:
    """A server: stdio with ``command`` (and ``args``, ``env``), streamable HTTP with ``url`` (and ``headers``);
    with neither, the ``DEUZ_MCP_SERVERS`` entry named ``name``."""
    if not isinstance(name, str) or not name:
        raise ValueError("An MCP server needs a non-empty name.")
    if command is None and url is None:
        return _server_from_environment(name)
    if command is not None and url is not None:
        raise ValueError(f"MCP server {name!r} takes a command or a url, not both.")
    if command is not None and (not isinstance(command, str) or not command):
        raise ValueError(f"MCP server {name!r}: command must be a non-empty string.")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise ValueError(f"MCP server {name!r}: url must be an http(s) URL.")
    args = tuple(args)
    if not all(isinstance(arg, str) for arg in args):
        raise ValueError(f"MCP server {name!r}: args must be strings.")
    return MCPServerSpec(
        name=name,
        command=command,
        args=args,
        env=_pairs(name, "env", env),
        url=url,
        headers=_pairs(name, "headers", headers),
        trust_annotations=bool(trust_annotations),
    )


def _pairs(name: str, what: str, mapping: Mapping[str, str] | None) -> tuple[tuple[str, str], ...] | None:
    if mapping is None:
        return None
    if not isinstance(mapping, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in mapping.items()
    ):
        raise ValueError(f"MCP server {name!r}: {what} must map strings to strings.")
    return tuple(sorted(mapping.items()))


def _server_from_environment(name: str) -> MCPServerSpec:
    raw = os.environ.get(MCP_SERVERS_ENV)
    if not raw:
        raise LookupError(f"MCP server {name!r} is not configured: {MCP_SERVERS_ENV} is not set.")
    try:
        servers = json.loads(raw)
    except ValueError:
        raise ValueError(f"{MCP_SERVERS_ENV} is not a JSON object.") from None
    if not isinstance(servers, dict):
        raise ValueError(f"{MCP_SERVERS_ENV} is not a JSON object.")
    if name not in servers:
        raise LookupError(f"MCP server {name!r} is not configured: {MCP_SERVERS_ENV} has no {name!r} entry.")
    entry = servers[name]
    known = {"command", "args", "env", "url", "headers", "trust_annotations"}
    if not isinstance(entry, dict) or set(entry) - known or ("command" in entry) == ("url" in entry):
        raise ValueError(
            f"{MCP_SERVERS_ENV} entry {name!r} must be an object with a \"command\" (and \"args\", \"env\") or a "
            "\"url\" (and \"headers\"), plus an optional \"trust_annotations\"."
        )
    trust = entry.get("trust_annotations", True)
    args = entry.get("args", [])
    if not isinstance(trust, bool) or not isinstance(args, list):
        raise ValueError(f"{MCP_SERVERS_ENV} entry {name!r}: trust_annotations is a boolean and args a list.")
    try:
        return mcp_server(
            name,
            command=entry.get("command"),
            args=args,
            env=entry.get("env"),
            url=entry.get("url"),
            headers=entry.get("headers"),
            trust_annotations=trust,
        )
    except ValueError as exc:
        raise ValueError(f"{MCP_SERVERS_ENV} entry {name!r} is malformed: {_reason(exc)}") from None


def mcp_servers_problems() -> list[str]:
    """What is wrong with ``DEUZ_MCP_SERVERS`` (unset: nothing), one message per bad entry, naming only entries."""
    raw = os.environ.get(MCP_SERVERS_ENV)
    if not raw:
        return []
    try:
        servers = json.loads(raw)
    except ValueError:
        servers = None
    if not isinstance(servers, dict):
        return [f"{MCP_SERVERS_ENV} is not a JSON object."]
    problems = []
    for name in servers:
        try:
            mcp_server(name)
        except (LookupError, ValueError) as exc:
            problems.append(str(exc))
    return problems


def _reason(exc: ValueError) -> str:
    # Our own messages name the server and the option, never its value.
    return str(exc).split(": ", 1)[-1]


# ------------------------------------------------------------------ sessions


_SESSIONS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[MCPServerSpec, _Session]] = (
    weakref.WeakKeyDictionary()
)


class _Session:
    """One connected client, owned by one task of one loop; requests reach it through a queue."""

    def __init__(self, server: MCPServerSpec) -> None:
        self.server = server
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[None] = loop.create_future()
        self.jobs: asyncio.Queue[tuple[Callable[[Any], Any], asyncio.Future[Any]] | None] = asyncio.Queue()
        self.is_closed = False
        self.task = loop.create_task(self._own(), name=f"mcp-session:{server.name}")

    async def _own(self) -> None:
        import anyio

        in_flight: set[asyncio.Future[Any]] = set()
        try:
            async with _client(self.server) as client:
                self.ready.set_result(None)
                async with anyio.create_task_group() as group:
                    while (job := await self.jobs.get()) is not None:
                        in_flight.add(job[1])
                        job[1].add_done_callback(in_flight.discard)
                        group.start_soon(self._serve, client, *job)
                    group.cancel_scope.cancel()
        except BaseException as exc:
            if not self.ready.done():
                self.ready.set_exception(MCPServerUnreachable(_unreachable(self.server)))
            if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
                raise  # its loop is ending: the session closes with it
            logger.warning("MCP server %r session ended (%s).", self.server.name, type(exc).__name__)
        finally:
            self.is_closed = True
            _forget(self)
            for future in in_flight:
                if not future.done():
                    future.set_exception(MCPConnectionLost(f"MCP server {self.server.name!r} went away mid-call."))
            while not self.jobs.empty():
                job = self.jobs.get_nowait()
                if job is not None and not job[1].done():
                    job[1].set_exception(MCPServerUnreachable(_unreachable(self.server)))

    async def _serve(self, client: Any, work: Callable[[Any], Any], future: asyncio.Future[Any]) -> None:
        try:
            result = await work(client)
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
        else:
            if not future.done():
                future.set_result(result)

    async def request(self, work: Callable[[Any], Any], *, timeout: float) -> Any:
        if self.is_closed:
            raise MCPServerUnreachable(_unreachable(self.server))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self.jobs.put((work, future))
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            self.close()  # a session that stopped answering is not reused
            raise
        finally:
            # A call given up on (timed out, its leg cancelled) fails later, when the session closes: nobody awaits
            # it then, and asyncio would log its error as never retrieved.
            future.add_done_callback(_retrieved)

    def close(self) -> None:
        if not self.is_closed:
            self.is_closed = True
            _forget(self)
            self.jobs.put_nowait(None)

    async def aclose(self, timeout: float = 10.0) -> None:
        self.close()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), timeout)
        except TimeoutError:
            self.task.cancel()  # a server that will not stop does not hold the caller
        except asyncio.CancelledError:
            self.task.cancel()
            raise
        except Exception:
            pass  # it ended with an error: closed all the same


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _forget(session: _Session) -> None:
    with contextlib.suppress(RuntimeError):
        sessions = _SESSIONS.get(session.task.get_loop(), {})
        if sessions.get(session.server) is session:
            del sessions[session.server]


@contextlib.asynccontextmanager
async def _client(server: MCPServerSpec) -> Any:
    from mcp.client import Client

    async with contextlib.AsyncExitStack() as stack:
        if server.command is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            # The server's stderr may echo its arguments (paths, tokens): it never reaches our logs.
            errlog = stack.enter_context(open(os.devnull, "w"))
            params = StdioServerParameters(command=server.command, args=list(server.args), env=dict(server.env or ()))
            transport: Any = stdio_client(params, errlog=errlog)
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http = await stack.enter_async_context(httpx2.AsyncClient(
                headers=dict(server.headers or ()),
                timeout=httpx2.Timeout(CONNECT_TIMEOUT_SECONDS, read=CALL_TIMEOUT_SECONDS),
                trust_env=False,
            ))
            transport = streamable_http_client(server.url, http_client=http)  # type: ignore[arg-type]
        # No response cache: each leg lists the server's current tools.
        client = await stack.enter_async_context(Client(transport, cache=None, read_timeout_seconds=CALL_TIMEOUT_SECONDS))
        yield client


async def _session(server: MCPServerSpec) -> _Session:
    """The loop's open session with ``server``, connected first when there is none."""
    sessions = _SESSIONS.setdefault(asyncio.get_running_loop(), {})
    session = sessions.get(server)
    if session is None or session.is_closed:
        session = sessions[server] = _Session(server)
    try:
        await asyncio.wait_for(asyncio.shield(session.ready), CONNECT_TIMEOUT_SECONDS)
    except asyncio.CancelledError:
        raise
    except Exception:
        session.close()
        raise MCPServerUnreachable(_unreachable(server)) from None
    return session


async def aclose_mcp_sessions() -> int:
    """Close every MCP session of the running event loop (a worker calls this at shutdown); returns how many."""
    sessions = list(_SESSIONS.pop(asyncio.get_running_loop(), {}).values())
    for session in sessions:
        await session.aclose()
    return len(sessions)


def _unreachable(server: MCPServerSpec) -> str:
    return f"MCP server {server.name!r} is unreachable."


async def _list(server: MCPServerSpec) -> list[Any]:
    async def work(client: Any) -> list[Any]:
        tools, cursor = [], None
        for _ in range(100):  # a paginator that never ends cannot hang a leg
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    session = await _session(server)
    try:
        return await session.request(work, timeout=CALL_TIMEOUT_SECONDS)
    except asyncio.CancelledError:
        raise
    except Exception:
        session.close()
        raise MCPServerUnreachable(_unreachable(server)) from None


async def _call(server: MCPServerSpec, name: str, arguments: dict[str, Any]) -> Any:
    """Call a tool. A server that does not answer a listing first was not reached (``MCPServerUnreachable``); one
    lost after that has an unknown outcome (``MCPConnectionLost``, ``MCPCallTimedOut``)."""
    from mcp.shared.exceptions import MCPError

    session = await _session(server)
    for attempt in (1, 2):
        try:
            # A listing, not a ping (removed from the 2026-07-28 protocol): does the server answer right now?
            await session.request(lambda client: client.list_tools(), timeout=PING_TIMEOUT_SECONDS)
            break
        except asyncio.CancelledError:
            raise
        except Exception:
            session.close()
            if attempt == 2:
                raise MCPServerUnreachable(_unreachable(server)) from None
            session = await _session(server)  # the server may have restarted: reconnect once
    try:
        result = await session.request(lambda client: client.call_tool(name, arguments), timeout=CALL_TIMEOUT_SECONDS)
    except asyncio.CancelledError:
        raise
    except TimeoutError:
        raise MCPCallTimedOut(f"MCP server {server.name!r} did not answer the call of {name!r} in time.") from None
    except MCPError as exc:
        if exc.code in _REFUSALS:  # the server answered: nothing was done. Its message is its own.
            raise MCPToolError(f"MCP server {server.name!r} refused the call of {name!r}: {_text(exc, server)}") from None
        session.close()  # the transport's errors (closed, timed out, 5xx) arrive as MCPError too: unknown outcome
        raise MCPConnectionLost(f"MCP server {server.name!r} went away during the call of {name!r}.") from None
    except Exception:
        session.close()
        raise MCPConnectionLost(f"MCP server {server.name!r} went away during the call of {name!r}.") from None
    if result.is_error:
        output = _output(result)
        raise MCPToolError(redact(output if isinstance(output, str) else json.dumps(output), server.secrets)[:4000])
    return _output(result)


def _text(exc: Exception, server: MCPServerSpec) -> str:
    return redact(str(getattr(getattr(exc, "error", None), "message", None) or exc), server.secrets)[:2000]


def _output(result: Any) -> Any:
    """What the model reads: the structured content when there is one, else the text (or the content blocks)."""
    if result.structured_content is not None:
        return result.structured_content
    blocks = list(result.content or [])
    if all(getattr(block, "type", None) == "text" for block in blocks):
        return "\n".join(block.text for block in blocks)
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in blocks]


# ------------------------------------------------------------------ toolsets


@dataclass(frozen=True, kw_only=True)
class MCPToolset:
    """The tools of one MCP server, as a toolset (runs.runtime.toolsets): listed when a leg starts."""

    server: MCPServerSpec
    include: frozenset[str] | None = None
    exclude: frozenset[str] = frozenset()
    prefix: str = ""
    needs_approval: NeedsApproval | None = None
    effect: Effect | bool | None = None

    @property
    def description(self) -> str:
        return f"The tools of MCP server {self.server.name!r}, listed when each leg starts."

    def _offers(self, name: str) -> bool:
        return (self.include is None or name in self.include) and name not in self.exclude

    async def list_tools(self) -> LegTools:
        try:
            listed = await _list(self.server)
        except MCPServerUnreachable as exc:
            # Calls of this server's tools (from an earlier leg) get the reason as their result.
            logger.warning("%s Its tools are not offered this leg.", exc)
            stand_in = _stand_in(str(exc), self.server)
            return LegTools(stand_ins=[lambda name: stand_in if name.startswith(self.prefix) else None])
        tools = LegTools()
        for mcp_tool in listed:
            if self._offers(mcp_tool.name):
                tools[f"{self.prefix}{mcp_tool.name}"] = self._tool(mcp_tool)
        gone = _stand_in(f"MCP server {self.server.name!r} no longer offers this tool.", self.server)
        prefix = self.prefix
        tools.stand_ins.append(lambda name: gone if prefix and name.startswith(prefix) else None)
        return tools

    def _tool(self, mcp_tool: Any) -> Tool:
        hints = mcp_tool.annotations if self.server.trust_annotations else None
        is_read_only = bool(hints is not None and hints.read_only_hint)
        is_idempotent = bool(hints is not None and hints.idempotent_hint)
        needs_approval = (not is_read_only) if self.needs_approval is None else self.needs_approval
        server, name = self.server, mcp_tool.name

        async def execute(tool_input: dict[str, Any], ctx: ToolContext) -> Any:
            return await _call(server, name, tool_input)

        if self.effect is False:
            effect = None
        elif isinstance(self.effect, Effect):
            effect = self.effect
        elif self.effect is True or not is_read_only:
            effect = Effect(reconcile=_call_again(server, name)) if is_idempotent else Effect()
        else:
            effect = None
        return Tool(
            name=f"{self.prefix}{name}",
            description=mcp_tool.description or mcp_tool.title or "",
            input_schema=dict(mcp_tool.input_schema or {"type": "object", "properties": {}}),
            execute=execute,
            needs_approval=needs_approval,
            effect=effect,
        )


def _call_again(server: MCPServerSpec, name: str) -> Callable[[EffectCall], Any]:
    """An idempotent tool's reconciliation: calling it again with the same input is safe and gives the outcome."""

    async def reconcile(call: EffectCall) -> Any:
        output = await _call(server, name, dict(call.input))
        return {} if output is None else output

    return reconcile


def _stand_in(reason: str, server: MCPServerSpec) -> Tool:
    async def execute(tool_input: dict[str, Any], ctx: ToolContext) -> Any:
        raise MCPServerUnreachable(reason)

    # Permissive schema: the reason, not a schema complaint, is what the model reads.
    return Tool(description=reason, input_schema={}, execute=execute)


def mcp_tools(
    server: MCPServerSpec | str,
    *,
    include: Iterable[str] | None = None,
    exclude: Iterable[str] | None = None,
    prefix: str | None = None,
    needs_approval: NeedsApproval | None = None,
    effect: Effect | bool | None = None,
) -> MCPToolset:
    """The tools of ``server`` (an ``mcp_server(...)``, or the name of a ``DEUZ_MCP_SERVERS`` entry), accepted
    wherever ``tools`` is. ``include``/``exclude`` pick tools by their server-side name; the model sees
    ``f"{prefix}{name}"``. ``needs_approval`` and ``effect`` (an ``Effect``, or False for no ledger) override the
    annotations' defaults for every tool."""
    if isinstance(server, str):
        server = mcp_server(server)
    if not isinstance(server, MCPServerSpec):
        raise TypeError("mcp_tools takes an mcp_server(...) or a server name.")
    if effect is not None and not isinstance(effect, (Effect, bool)):
        raise TypeError("effect is an Effect, or False for no ledger entry.")
    return MCPToolset(
        server=server,
        include=None if include is None else frozenset(include),
        exclude=frozenset(exclude or ()),
        prefix=prefix or "",
        needs_approval=needs_approval,
        effect=effect,
    )
