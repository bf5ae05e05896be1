"""`manage.py check --deploy` on production settings from the environment, in a fresh process."""

from __future__ import annotations

import subprocess
import sys

from django.core.management.utils import get_random_secret_key

from tests.environment import REPO_ROOT, clean_env

# DEBUG off with strong secrets (a key of 50 repeated letters would itself warn, W009), and nothing else.
BARE_PRODUCTION_ENV = {
    "DEBUG": "0", "DJANGO_SECRET_KEY": get_random_secret_key(), "DEUZ_APPROVAL_SECRET": get_random_secret_key(),
}

# A complete deployment behind a TLS-terminating proxy, as README's configuration table describes it.
DEPLOYED_ENV = {
    **BARE_PRODUCTION_ENV,
    "ALLOWED_HOSTS": "deuz.example",
    "CSRF_TRUSTED_ORIGINS": "https://deuz.example",
    "DEUZ_PROXY_SSL_HEADER": "1",
    "DEUZ_HSTS_PRELOAD": "1",
    "EMAIL_URL": "smtp://deuz:password@mail.deuz.example:587/?tls=True",
    "DEUZ_PUBLIC_URL": "https://deuz.example",
}


def check_deploy(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO_ROOT, env=clean_env(**env), capture_output=True, text=True, timeout=120,
    )


def test_check_deploy_is_clean_on_a_complete_production_environment():
    result = check_deploy(**DEPLOYED_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_the_secure_defaults_leave_no_transport_or_cookie_warning():
    result = check_deploy(**BARE_PRODUCTION_ENV)
    output = result.stdout + result.stderr
    for warning in ("W004", "W005", "W008", "W012", "W016", "W018"):  # HSTS, subdomains, redirect, cookies, DEBUG
        assert f"security.{warning}" not in output, output
    assert "security.W021" in output  # only the HSTS preload opt-in is left to the operator
