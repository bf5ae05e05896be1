"""`manage.py serve` in a child process for the browser tests, with the URL it prints."""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
import time

from tests.environment import REPO_ROOT


class ServeProcess:
    """A running `manage.py serve --port 0 ...`; ``url`` is where it answers once it printed its banner."""

    def __init__(self, *args: str, env: dict[str, str], timeout: float = 60) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", "0", *args],
            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self.output: list[str] = []
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(lines,), daemon=True).start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=deadline - time.monotonic())
            except queue.Empty:
                break
            if line is None:
                break
            if match := re.search(r"Deuz is serving at (http://\S+/)", line):
                self.url = match.group(1)
                return
        self.stop()
        raise AssertionError(f"`manage.py serve` printed no URL; its output:\n{''.join(self.output)}")

    def _pump(self, lines: queue.Queue[str | None]) -> None:
        for line in self.process.stdout:
            self.output.append(line)
            lines.put(line)
        lines.put(None)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
