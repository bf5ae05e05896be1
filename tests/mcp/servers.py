"""Test MCP servers: the HTTP one of tests.mcp.server in its own process, and the real filesystem server."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.environment import REPO_ROOT

REPO = REPO_ROOT
FILESYSTEM_SERVER = REPO / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpServer:
    """``tests.mcp.server`` on 127.0.0.1; ``url`` is its MCP endpoint, ``calls()`` what it was asked to change."""

    def __init__(self, tmp_path: Path, *, port: int | None = None) -> None:
        self.port = port or free_port()
        self.journal = tmp_path / f"mcp-calls-{self.port}.jsonl"
        self.journal.touch()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen | None = None

    def start(self, *, without: tuple[str, ...] = ()) -> HttpServer:
        command = [sys.executable, "-m", "tests.mcp.server", "--port", str(self.port), "--journal", str(self.journal)]
        for name in without:
            command += ["--without", name]
        self.process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError("The test MCP server exited at start-up.")
                time.sleep(0.05)
        raise RuntimeError("The test MCP server did not start listening in 20 s.")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def calls(self) -> list[dict]:
        return [json.loads(line) for line in self.journal.read_text().splitlines() if line]

    def __enter__(self) -> HttpServer:
        """Started; killed when the block ends (a test's fixture: ``with HttpServer(tmp_path) as running``)."""
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.kill()


def filesystem_server_args(folder: Path) -> tuple[str, list[str]]:
    """``node`` and the arguments that serve ``folder`` with @modelcontextprotocol/server-filesystem."""
    if not FILESYSTEM_SERVER.exists():
        raise AssertionError(
            "node_modules has no @modelcontextprotocol/server-filesystem: run `npm ci` at the repository root "
            "(./scripts/test does it)."
        )
    return "node", [str(FILESYSTEM_SERVER), str(folder)]


def environment_without_django() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
