"""The runtime is pure: importing it pulls in no Django."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.environment import REPO_ROOT


def test_importing_the_runtime_does_not_import_django():
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    code = (
        "import sys, runs.runtime, runs.runtime.durable, runs.runtime.testing\n"
        "print(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')))"
    )
    completed = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                               timeout=60, check=True)
    assert completed.stdout.strip() == "[]"
