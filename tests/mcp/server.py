"""A streamable-HTTP MCP server for the tests, built with the ``mcp`` package's server API and run as its own
process (``python -m tests.mcp.server --port N --journal FILE``), so a test can kill it mid-run. Every call of a
tool that changes something is appended to the journal file, so a test counts calls across processes."""

from __future__ import annotations

import argparse
import json
import time

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations


def build(journal: str, without: set[str]) -> MCPServer:
    server = MCPServer("deuz-test")

    def record(entry: dict) -> None:
        with open(journal, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def lookup(key: str) -> str:
        """Read a record."""
        return f"record {key}: 42"

    def delete_record(key: str) -> str:
        """Delete a record."""
        record({"tool": "delete_record", "key": key})
        return f"deleted {key}"

    def slow_delete(key: str) -> str:
        """Delete a record, slowly."""
        record({"tool": "slow_delete", "key": key})
        time.sleep(30)
        return f"deleted {key}"

    def set_flag(key: str) -> str:
        """Set a flag (the same input sets the same flag)."""
        record({"tool": "set_flag", "key": key})
        return f"flag {key} set"

    tools = {
        "lookup": (lookup, ToolAnnotations(read_only_hint=True)),
        "delete_record": (delete_record, ToolAnnotations(destructive_hint=True)),
        "slow_delete": (slow_delete, ToolAnnotations(destructive_hint=True)),
        "set_flag": (set_flag, ToolAnnotations(idempotent_hint=True, destructive_hint=False)),
    }
    for name, (fn, annotations) in tools.items():
        if name not in without:
            server.add_tool(fn, name=name, annotations=annotations)
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--journal", required=True)
    parser.add_argument("--without", action="append", default=[])
    options = parser.parse_args()
    build(options.journal, set(options.without)).run(
        "streamable-http", host="127.0.0.1", port=options.port
    )


if __name__ == "__main__":
    main()
