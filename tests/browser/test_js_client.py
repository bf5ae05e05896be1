"""The browser client's unit tests (tests/browser/deuz_stream.test.mjs) on node's built-in test runner."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.environment import REPO_ROOT


def test_the_stream_client_passes_its_node_unit_tests():
    node = shutil.which("node")
    if node is None:
        pytest.fail("The browser client's unit tests need Node.js: `apt-get install -y nodejs` (.ci/run does).")
    result = subprocess.run(
        [node, "--test", "tests/browser/deuz_stream.test.mjs"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=100,
    )
    assert result.returncode == 0, result.stdout + result.stderr
