"""Toolsets: tools whose list is only known when a leg starts (an MCP server's), expanded into plain ``Tool``s.

A toolset is any object with ``async list_tools() -> LegTools`` (``runs.runtime.mcp.mcp_tools`` builds one). It may
stand wherever ``tools`` is: alone, in a list beside tools, or as a value of a tools dict (its key is not a name:
the toolset names its own tools). ``list_leg_tools`` lists every toolset once per leg, so each leg sees the
server's current tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from .tools import LegTools, Tool, normalize_tools

__all__ = ["LegTools", "Toolset", "has_toolsets", "list_leg_tools"]


@runtime_checkable
class Toolset(Protocol):
    async def list_tools(self) -> LegTools: ...


def _is_toolset(item: Any) -> bool:
    return not isinstance(item, Tool) and isinstance(item, Toolset)


def has_toolsets(tools: Any) -> bool:
    if tools is None or isinstance(tools, LegTools):
        return False
    if _is_toolset(tools):
        return True
    items = tools.values() if isinstance(tools, Mapping) else tools
    return any(_is_toolset(item) for item in items)


async def list_leg_tools(tools: Any) -> Any:
    """``tools`` with every toolset listed into a ``LegTools``; ``tools`` itself when it holds no toolset."""
    if not has_toolsets(tools):
        return tools
    if _is_toolset(tools):
        return await tools.list_tools()
    plain: dict[str, Tool] = {}
    listed = LegTools()
    if isinstance(tools, Mapping):
        for key, item in tools.items():
            if _is_toolset(item):
                _merge(listed, await item.list_tools())
            else:
                plain.update(normalize_tools({key: item}))
    else:
        for item in tools:
            if _is_toolset(item):
                _merge(listed, await item.list_tools())
            else:
                plain.update(normalize_tools([item]))
    for name, item in plain.items():
        if name in listed:
            raise ValueError(f"Two tools are named {name!r}.")
        listed[name] = item
    return listed


def _merge(into: LegTools, more: LegTools) -> None:
    for name in more:
        if name in into:
            raise ValueError(f"Two tools are named {name!r}; give one toolset a prefix.")
    into.update(more)
    into.stand_ins.extend(more.stand_ins)

