"""Controlled environments for tests that start a fresh interpreter or a server process."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

# Variables the settings read; a subprocess test starts from none of them set.
DEUZ_ENV_VARS = (
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "DATABASE_URL",
    "DEBUG",
    "DEUZ_APPROVAL_MAX_AGE_SECONDS",
    "DEUZ_APPROVAL_SECRET",
    "DEUZ_CSP_REPORT_ONLY",
    "DEUZ_DEMO_DELAY_MS",
    "DEUZ_DATABASE_POOL_SIZE",
    "DEUZ_DEMO_MODEL",
    "DEUZ_DIRECT_CONNECTIONS",
    "DEUZ_DIRECT_SAVES",
    "DEUZ_ENCRYPTION_KEYS",
    "DEUZ_FAULT",
    "DEUZ_HSTS_INCLUDE_SUBDOMAINS",
    "DEUZ_HSTS_PRELOAD",
    "DEUZ_HSTS_SECONDS",
    "DEUZ_LEASE_SECONDS",
    "DEUZ_MAX_STREAMS_PER_USER",
    "DEUZ_FOLLOWER_DATABASE_THREADS",
    "DEUZ_PROXY_SSL_HEADER",
    "DEUZ_SECURE_COOKIES",
    "DEUZ_SSL_REDIRECT",
    "DEUZ_MODEL_TIMEOUT_SECONDS",
    "DEUZ_MODEL_MAX_RETRIES",
    "DEUZ_MODEL_RETRY_ATTEMPTS",
    "DEUZ_MODEL_RETRY_BASE_SECONDS",
    "DEUZ_MODEL_RETRY_MAX_SECONDS",
    "DEUZ_MODEL_MAX_TOKENS",
    "DEUZ_MODEL_TEMPERATURE",
    "DEUZ_MODEL_EXTRA_HEADERS",
    "DEUZ_ANTHROPIC_PROMPT_CACHING",
    "DEUZ_OPENAI_STREAM_USAGE",
    "DEUZ_WEBHOOK_ALLOW_PRIVATE",
    "DEUZ_WEBHOOK_RETRY_BASE_SECONDS",
    "EMAIL_URL",
    "DEFAULT_FROM_EMAIL",
    "DEUZ_PUBLIC_URL",
    "DEUZ_REVIEW_EMAIL_DIGEST_SECONDS",
    "DEUZ_LOG_FORMAT",
    "DEUZ_TRACE_CONTENT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
    "OTEL_SDK_DISABLED",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "DJANGO_SECRET_KEY",
    "REDIS_URL",
)

# The smallest environment that passes for production (DEBUG off, both secrets set), served the way the tests
# serve it: over plain HTTP on the loopback, so with no redirect to HTTPS and cookies a browser sends over HTTP.
PRODUCTION_ENV = {
    "DEBUG": "0", "DJANGO_SECRET_KEY": "k" * 50, "DEUZ_APPROVAL_SECRET": "a" * 32,
    "DEUZ_SSL_REDIRECT": "0", "DEUZ_SECURE_COOKIES": "0",
}


def clean_env(**overrides: str) -> dict[str, str]:
    """This process's environment minus every Deuz setting, plus ``overrides``."""
    env = {key: value for key, value in os.environ.items() if key not in DEUZ_ENV_VARS}
    env["DJANGO_SETTINGS_MODULE"] = "deuz_project.settings"
    env.update(overrides)
    return env
