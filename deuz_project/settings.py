"""Deuz settings: embedded defaults for development, the environment for production.

Every value that differs between machines comes from an environment variable
(see README.md); a missing or malformed one raises ImproperlyConfigured that
names it, so a misconfigured process refuses to start instead of half-working.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from deuz_project.env import (
    env_agents,
    env_bool,
    env_choice,
    env_demo_model,
    env_email,
    env_fernet_keys,
    env_float,
    env_headers,
    env_int,
    env_list,
    env_optional_int,
    env_origins,
    env_secret,
    env_str,
    env_url,
)

# Repository root: manage.py, templates/, the default SQLite file live here.
BASE_DIR = Path(__file__).resolve().parent.parent

# DEBUG defaults to on so `./scripts/dev` works on a fresh machine; production sets DEBUG=0.
DEBUG = env_bool("DEBUG", default=True)

# Signs sessions and CSRF tokens; only DEBUG may fall back to this publicly known key.
SECRET_KEY = env_secret(
    "DJANGO_SECRET_KEY",
    dev_default="django-insecure-deuz-development-key-never-use-in-production" if DEBUG else None,
)

# Signs approval tokens (one key per purpose, so it is never SECRET_KEY); required outside DEBUG.
DEUZ_APPROVAL_SECRET = env_secret(
    "DEUZ_APPROVAL_SECRET",
    dev_default="insecure-deuz-development-approval-secret" if DEBUG else None,
)

# Host names this site answers to; the test runner adds "testserver" itself.
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])

# Origins (https://host[:port], comma-separated) trusted for unsafe requests besides this host itself:
# needed when a proxy or another front end on a different origin posts the console's or the admin's forms.
CSRF_TRUSTED_ORIGINS = env_origins("CSRF_TRUSTED_ORIGINS")

# Transport security: every default below is the secure one when DEBUG is off, the relaxed one when it is on,
# so a development server works over plain HTTP and a production one never silently falls back to it.

# Trust X-Forwarded-Proto: https from a TLS-terminating proxy; opt-in, because without a proxy that sets (and
# strips a client's own) header, any client could claim a plain HTTP request came over HTTPS.
if env_bool("DEUZ_PROXY_SSL_HEADER", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Redirect HTTP to HTTPS. /healthz stays reachable over HTTP: load balancers probe it and read 200/503, not 301.
# Behind a TLS-terminating proxy this needs DEUZ_PROXY_SSL_HEADER, or every request would loop on the redirect.
SECURE_SSL_REDIRECT = env_bool("DEUZ_SSL_REDIRECT", default=not DEBUG)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]

# Session and CSRF cookies only over HTTPS, so a network observer never sees a session.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("DEUZ_SECURE_COOKIES", default=not DEBUG)

# HSTS (sent on HTTPS responses only): browsers remember for this long to use HTTPS; one year by default
# outside DEBUG. 0 sends no header (the development default: a browser would remember it for localhost too).
SECURE_HSTS_SECONDS = env_int("DEUZ_HSTS_SECONDS", default=0 if DEBUG else 31_536_000, minimum=0)
# ...for this host's subdomains too.
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DEUZ_HSTS_INCLUDE_SUBDOMAINS", default=not DEBUG)
# ...and ask to be on the browsers' preload list: opt-in, since leaving that list takes months.
SECURE_HSTS_PRELOAD = env_bool("DEUZ_HSTS_PRELOAD", default=False)
if SECURE_HSTS_PRELOAD and (SECURE_HSTS_SECONDS < 31_536_000 or not SECURE_HSTS_INCLUDE_SUBDOMAINS):
    raise ImproperlyConfigured(
        "DEUZ_HSTS_PRELOAD needs DEUZ_HSTS_SECONDS of at least 31536000 and DEUZ_HSTS_INCLUDE_SUBDOMAINS on "
        "(the preload list accepts nothing less)."
    )

# Content-Security-Policy: scripts and styles come from this origin's static files, or inline with the
# response's nonce (the admin's and Swagger UI's templates carry it); no inline handlers or style attributes,
# no eval, no plugins, no framing, forms post only here. Images may be data: URIs (Swagger UI's CSS icons).
_csp_policy = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF, CSP.NONCE],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],  # the API, the SSE stream and the WebSocket, all on this origin
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
# Report-Only sends the same policy without enforcing it: browsers log violations and block nothing. The
# default while DEBUG is on, so Django's debug pages (inline styles and scripts, no nonce) keep working.
if env_bool("DEUZ_CSP_REPORT_ONLY", default=DEBUG):
    SECURE_CSP, SECURE_CSP_REPORT_ONLY = {}, _csp_policy
else:
    SECURE_CSP, SECURE_CSP_REPORT_ONLY = _csp_policy, {}

# How long a worker's claim on a run lasts before another worker may take it over.
DEUZ_LEASE_SECONDS = env_int("DEUZ_LEASE_SECONDS", default=15, minimum=1)

# Open streams (SSE and WebSocket) one user may hold per web process; one more answers 429 / closes 4429.
DEUZ_MAX_STREAMS_PER_USER = env_int("DEUZ_MAX_STREAMS_PER_USER", default=20, minimum=1)

# Database connections a web process's followers share, whatever their number (runs/follower_reads.py).
DEUZ_FOLLOWER_DATABASE_THREADS = env_int("DEUZ_FOLLOWER_DATABASE_THREADS", default=4, minimum=1)
# A leg's steady checkpoint saves skip the ORM's thread (runs.stores.direct): on the event loop's own SQLite
# connection, or a few async PostgreSQL connections per process shared by its legs. Off: every save through the ORM.
DEUZ_DIRECT_SAVES = env_bool("DEUZ_DIRECT_SAVES", default=True)
# At most this many of those PostgreSQL connections per event loop (one while saves do not overlap).
DEUZ_DIRECT_CONNECTIONS = env_int("DEUZ_DIRECT_CONNECTIONS", default=4, minimum=1)

# How long an approval request stays decidable after it is issued.
DEUZ_APPROVAL_MAX_AGE_SECONDS = env_int("DEUZ_APPROVAL_MAX_AGE_SECONDS", default=86400, minimum=1)

# Four eyes: a run's creator never decides the approvals reviewers decide, even as a reviewer or superuser.
# DEUZ_FOUR_EYES=0 lets one person decide their own runs (one-person installs).
DEUZ_FOUR_EYES = env_bool("DEUZ_FOUR_EYES", default=True)

# GET /metrics answers a scrape that sends this bearer token; unset, the endpoint does not exist (404).
DEUZ_METRICS_TOKEN = env_str("DEUZ_METRICS_TOKEN")

# Traces (observability.tracing) follow OpenTelemetry's OTEL_* variables; message contents, tool inputs and outputs
# go into spans only when this is on (off: spans say what ran, never what was said).
DEUZ_TRACE_CONTENT = env_bool("DEUZ_TRACE_CONTENT", default=False)

# The demo agents' pause between text deltas, so streaming is visible in a browser.
DEUZ_DEMO_DELAY_MS = env_int("DEUZ_DEMO_DELAY_MS", default=20, minimum=0)

# Webhooks (notifications): a delivery that did not get a 2xx answer within 10 s is retried after this many
# seconds, each next retry waiting twice as long, for at least 24 hours.
DEUZ_WEBHOOK_RETRY_BASE_SECONDS = env_float("DEUZ_WEBHOOK_RETRY_BASE_SECONDS", default=30.0, positive=True)

# With DEBUG off, webhooks go to public addresses only; 1 also allows loopback, link-local and private ones (a
# receiver on the same network).
DEUZ_WEBHOOK_ALLOW_PRIVATE = env_bool("DEUZ_WEBHOOK_ALLOW_PRIVATE", default=False)

# With DEBUG on, webhooks go to loopback addresses only, so a development install never sends a request anywhere
# else. Read from DEBUG as the process started, since the test runner turns DEBUG off for each test and the test
# suite must stay on the loopback as well (notifications.addresses).
DEUZ_WEBHOOK_LOOPBACK_ONLY = DEBUG

# Email (Django's email framework, its default mailer), configured by EMAIL_URL as dj-email-url reads it:
# smtp://user:password@host:587/?tls=True (or ?ssl=True; ?timeout=, else 10 s), console: (printed by the process that
# sends), file:///dir (one file per sending, for tests and staging). Unset: the console back end with DEBUG on;
# with DEBUG off, no mailer, and no email is sent.
_MAILER = env_email("EMAIL_URL")
if _MAILER is None and DEBUG:
    _MAILER = {"BACKEND": "django.core.mail.backends.console.EmailBackend"}
MAILERS = {"default": _MAILER} if _MAILER else {}
# The sender of Deuz's emails.
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL") or "Deuz <deuz@localhost>"

# Reviewers who may decide a new approval request are emailed a link to it (notifications.reviews), from the
# webhooks' outbox: on when EMAIL_URL is set, or with DEBUG on (the console back end); each user can turn them
# off on /account/.
DEUZ_REVIEW_EMAILS = _MAILER is not None

# Collect a reviewer's new requests for this many seconds and send them one email for them all (a busy queue);
# 0 sends one email per request as soon as it is stored.
DEUZ_REVIEW_EMAIL_DIGEST_SECONDS = env_int("DEUZ_REVIEW_EMAIL_DIGEST_SECONDS", default=0, minimum=0)

# Where people reach this server: the links in emails are built from it, never from a request's Host header.
# Required for email with DEBUG off (system check notifications.E001).
DEUZ_PUBLIC_URL = env_url("DEUZ_PUBLIC_URL") or ("http://127.0.0.1:8000" if DEBUG else None)

# Fernet keys (comma-separated) that encrypt checkpoint contents at rest; the first encrypts, all decrypt,
# so a new key goes first and old ones stay until nothing sealed with them is left. Unset: stored plain.
DEUZ_ENCRYPTION_KEYS = env_fernet_keys("DEUZ_ENCRYPTION_KEYS")

# Agents runs can name: name -> dotted path of a factory returning an AgentDefinition (runs.agents). The built-in
# demo agents, then the operator's own from DEUZ_AGENTS (a JSON object; a built-in's name there replaces it). An
# entry that cannot be imported stops `manage.py serve` and `worker` (system check runs.E001, naming it).
DEUZ_AGENTS = {
    "reimbursement": "demo.agents.reimbursement_agent",
    "coder": "demo.agents.coder_agent",
    "files": "demo.agents.files_agent",
    "assistant": "demo.agents.assistant_agent",
    **env_agents("DEUZ_AGENTS"),
}

# The files demo agent's sandbox folder, and the MCP filesystem server (package.json; npm ci) it runs over stdio.
DEUZ_DEMO_FILES_DIR = Path(env_str("DEUZ_DEMO_FILES_DIR") or BASE_DIR / ".demo-files")
DEUZ_DEMO_FILES_SERVER = BASE_DIR / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"

# The demo agents' model: "scripted" (no key needed), "anthropic:<model id>" or "openai:<model id>",
# the latter two with ANTHROPIC_API_KEY / OPENAI_API_KEY set, or a local base URL below (which needs none).
DEUZ_DEMO_MODEL = env_demo_model("DEUZ_DEMO_MODEL")

# Where Anthropic requests go (unset: api.anthropic.com), e.g. a gateway; an http:// or localhost URL needs no key.
DEUZ_ANTHROPIC_BASE_URL = env_url("ANTHROPIC_BASE_URL")

# An OpenAI-compatible server's base URL, ending in /v1 (Ollama: http://localhost:11434/v1; unset: api.openai.com).
DEUZ_OPENAI_BASE_URL = env_url("OPENAI_BASE_URL")

# Seconds one model request may take before it fails as a (transient) timeout; unset: the SDK's 600.
DEUZ_MODEL_TIMEOUT_SECONDS = env_float("DEUZ_MODEL_TIMEOUT_SECONDS", default=None, positive=True)

# The SDK's own quick retries of a failed model request (429, 5xx, connection), before the error reaches the run.
DEUZ_MODEL_MAX_RETRIES = env_int("DEUZ_MODEL_MAX_RETRIES", default=2, minimum=0)

# A run's own retries of a model call that failed transiently (rate limit, overload, 5xx, timeout, dropped
# connection, stream cut) after the SDK's quick ones: the run goes back to the queue and a later leg resumes it
# from its last checkpoint. At most this many retries in a row (a successful step resets the count), then the run
# fails with the reason; 0 fails it at once. An agent can set its own (AgentDefinition.retry).
DEUZ_MODEL_RETRY_ATTEMPTS = env_int("DEUZ_MODEL_RETRY_ATTEMPTS", default=5, minimum=0)

# The wait before the first of those retries, in seconds; each next one doubles it, with jitter (between half
# and all of it), so runs hit by the same outage do not come back at the same moment.
DEUZ_MODEL_RETRY_BASE_SECONDS = env_float("DEUZ_MODEL_RETRY_BASE_SECONDS", default=2.0, minimum=0)

# The longest wait before a retry, in seconds; the provider's retry-after is honoured up to it.
DEUZ_MODEL_RETRY_MAX_SECONDS = env_float("DEUZ_MODEL_RETRY_MAX_SECONDS", default=300.0, minimum=0)
if DEUZ_MODEL_RETRY_MAX_SECONDS < DEUZ_MODEL_RETRY_BASE_SECONDS:
    raise ImproperlyConfigured(
        f"DEUZ_MODEL_RETRY_MAX_SECONDS ({DEUZ_MODEL_RETRY_MAX_SECONDS:g}) must be at least "
        f"DEUZ_MODEL_RETRY_BASE_SECONDS ({DEUZ_MODEL_RETRY_BASE_SECONDS:g})."
    )

# The model's output limit per step; unset: 8192 for Anthropic (which requires one), none sent to OpenAI.
DEUZ_MODEL_MAX_TOKENS = env_optional_int("DEUZ_MODEL_MAX_TOKENS", minimum=1)

# Sampling temperature of the demo model; unset: the provider's default.
DEUZ_MODEL_TEMPERATURE = env_float("DEUZ_MODEL_TEMPERATURE", default=None, minimum=0)

# Extra HTTP headers on every model request, a JSON object of strings (e.g. '{"anthropic-beta": "..."}').
DEUZ_MODEL_EXTRA_HEADERS = env_headers("DEUZ_MODEL_EXTRA_HEADERS")

# Anthropic prompt caching (cache_control breakpoints); off for a compatible server that rejects them.
DEUZ_ANTHROPIC_PROMPT_CACHING = env_bool("DEUZ_ANTHROPIC_PROMPT_CACHING", default=True)

# Ask OpenAI-compatible servers for the usage chunk (stream_options); off for a server that rejects it.
DEUZ_OPENAI_STREAM_USAGE = env_bool("DEUZ_OPENAI_STREAM_USAGE", default=True)

# Where checkpoints ("sessions"), stream journals ("streams") and the effect ledger ("effects") live, same shape
# as CHANNEL_LAYERS: alias -> BACKEND and OPTIONS. Every construction goes through runs.stores.get_store(alias).
DEUZ_STORES = {
    "sessions": {"BACKEND": "runs.stores.sessions.DatabaseSessionStore"},
    "streams": {"BACKEND": "runs.stores.streams.DatabaseStreamStateStore"},
    "effects": {"BACKEND": "runs.stores.ledger.DatabaseEffectLedger"},
}

# Kill this process with SIGKILL at a named point (POINT[:N]) for crash tests; unset in production.
DEUZ_FAULT = env_str("DEUZ_FAULT")

# daphne comes first so its runserver (ASGI, WebSockets) replaces Django's WSGI one.
INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    # Sign-in and named, hashed API tokens. rest_framework.authtoken is gone: its clear-text keys were hashed
    # into accounts' tokens and its table dropped by accounts/migrations/0002_hash_drf_tokens.py.
    "accounts.apps.AccountsConfig",
    "runs.apps.RunsConfig",
    "approvals.apps.ApprovalsConfig",
    # Webhook subscriptions and the outbox that delivers them.
    "notifications.apps.NotificationsConfig",
    # The demo agents' sandboxes and demo users: nothing of the product depends on it.
    "demo.apps.DemoConfig",
    # GET /metrics for Prometheus.
    "observability.apps.ObservabilityConfig",
]

# WhiteNoise sits right after SecurityMiddleware: daphne serves no static files itself, and static files keep
# their own caching. Below it, every page and API answer is private and never stored and carries the CSP, and
# a path or parameter holding NUL is refused before sessions, users or any view reach the database; an /api/
# endpoint's path without its trailing slash is served as the endpoint, before CommonMiddleware would redirect it.
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "deuz_project.middleware.PrivateNoStoreMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "deuz_project.middleware.RefuseNulMiddleware",
    "deuz_project.middleware.ApiSlashOptionalMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# HTTP routes.
ROOT_URLCONF = "deuz_project.urls"

# A failed CSRF check answers JSON under /api/ and templates/403_csrf.html elsewhere.
CSRF_FAILURE_VIEW = "deuz_project.views.csrf_failure"

# Project templates (base.html, home.html) live in BASE_DIR/templates; apps keep their own.
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.csp",  # {{ csp_nonce }} for inline blocks
            ],
            # The pages' template tags live with the pages (runs/pages/), not in an app's templatetags package.
            "libraries": {"deuz_pages": "runs.pages.tags"},
        },
    },
]

# daphne and `manage.py serve` load this; WSGI is kept only for tools that need it.
ASGI_APPLICATION = "deuz_project.asgi.application"
WSGI_APPLICATION = "deuz_project.wsgi.application"


def _database_from_url(url: str) -> dict:
    """One DATABASES entry from a dj-database-url URL, tuned for concurrent writers."""
    try:
        # Health checks let a long-lived worker survive a PostgreSQL restart.
        config = dj_database_url.parse(url, conn_max_age=0, conn_health_checks=True)
    except ValueError as error:
        raise ImproperlyConfigured(f"DATABASE_URL is not a usable database URL: {error}") from None
    if config["ENGINE"] == "django.db.backends.postgresql":
        # A process frozen inside a transaction (a stopped VM, a debugger) must not hold a run's row lock
        # forever: PostgreSQL ends such a session, its locks go, and the run's lease can lapse and move on.
        # Sessions start in UTC, the zone Django's connections use with USE_TZ, so Django need not set it on each
        # new connection (a round trip before its first query, when the server's own zone is spelt otherwise).
        config.setdefault("OPTIONS", {}).setdefault(
            "options", "-c idle_in_transaction_session_timeout=60000 -c TimeZone=UTC"
        )
        pool_size = env_int("DEUZ_DATABASE_POOL_SIZE", default=20, minimum=0)
        if pool_size:
            # Each request's thread borrows a connection and gives it back (Django's psycopg pool), so 200 requests
            # at once wait a moment for one of a bounded few rather than open 200 and exhaust PostgreSQL. No
            # minimum: with one, a process's first borrow found it still opening and asked for a second (two
            # backends started at once, 2 ms of a fresh worker's 13 ms resume, issue 8); idle ones close after
            # psycopg_pool's max_idle (10 minutes). One maintenance thread: it only opens connections (one at a
            # time, as the pool grows) and closes idle ones, since Django's connections come back without a reset
            # task; the default three cost a fresh process 0.3 ms to start before its first connection.
            config["OPTIONS"]["pool"] = {"min_size": 0, "max_size": pool_size, "timeout": 30, "num_workers": 1}
    if config["ENGINE"] == "django.db.backends.sqlite3":
        options = config.setdefault("OPTIONS", {})
        # Workers and the server write the same file: wait for a lock instead of
        # failing at once, and take the write lock at BEGIN so two transactions
        # never deadlock upgrading read locks. WAL lets readers run beside a writer.
        options.setdefault("timeout", 20)
        options.setdefault("transaction_mode", "IMMEDIATE")
        options.setdefault("init_command", "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
        # Tests run worker processes against the test database, so it must be a file, not memory;
        # one per test process, so concurrent test runs never share it.
        config.setdefault("TEST", {}).setdefault(
            "NAME", str(Path(tempfile.gettempdir()) / f"deuz-test-{os.getpid()}.sqlite3")
        )
    return config


# DATABASE_URL (any URL dj-database-url reads); an SQLite file in the repository by default.
DATABASES = {
    "default": _database_from_url(
        env_str("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")
    ),
}

# Primary keys of new models are 64-bit.
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# REDIS_URL shares Channels groups across processes; without it, one process's memory only. Redis Pub/Sub
# (channels_redis.pubsub): a group message is one PUBLISH, pushed once to each process that has a member,
# and never stored in Redis. Its messages here are wake-ups a follower can do without (it polls the journal),
# so at-most-once delivery is what they need; the core layer's lists cost each receive two round trips,
# one process's receives in turn, and lagged 0.3-2 s at 1,000 messages a second (issue 8, live tail). Its
# receiver here wakes on a new subscription (runs.wire.channel_layers), not after an idle sleep of up to 100 ms.
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "runs.wire.channel_layers.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        },
    }
else:
    # In-memory, and safe across the event loops of embedded workers (runs.wire.channel_layers).
    CHANNEL_LAYERS = {"default": {"BACKEND": "runs.wire.channel_layers.LoopSafeInMemoryChannelLayer"}}

# Password rules for accounts created in the admin or with createsuperuser.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Pages that need a user send a visitor to the site's own sign-in (/accounts/login/, every role), not the admin's.
LOGIN_URL = "login"

# English UI; timestamps stored and compared in UTC.
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Static files are collected into STATIC_ROOT (`manage.py serve` does it) and served by WhiteNoise.
STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("DEUZ_STATIC_ROOT") or BASE_DIR / "staticfiles")
# Project-wide assets (the pages' stylesheets) beside the apps' own static/ folders.
STATICFILES_DIRS = [BASE_DIR / "static"]

# Compressed copies without a manifest, so templates render before collectstatic has run (tests).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# Every endpoint needs a user: a session for browsers, `Authorization: Token KEY` (or `Bearer KEY`) for clients.
REST_FRAMEWORK = {
    # Tokens first: their WWW-Authenticate header makes a missing or bad credential a 401, not a 403. The SSE view
    # (runs.api.events) authenticates with these classes too.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # JSON only, bounded: DRF's own parsers read the stream past DATA_UPLOAD_MAX_MEMORY_SIZE.
    "DEFAULT_PARSER_CLASSES": ["runs.api.parsers.BoundedJSONParser"],
    # JSON only: no browsable API, so no /api/ path answers an HTML page (issue 22); Accept: text/html alone is a 406.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # Domain errors (no such run, a token that does not verify...) become JSON 4xx answers.
    "EXCEPTION_HANDLER": "runs.api.error_handler.api_exception_handler",
}

# The largest request body read into memory (1 MiB): a larger one answers 413 instead of being parsed.
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024

# The OpenAPI document at /api/schema/; Swagger UI assets come from the sidecar app, so docs work offline.
SPECTACULAR_SETTINGS = {
    "TITLE": "Deuz API",
    "DESCRIPTION": "Start, follow and approve durable agent runs.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # No validator badge: it would send the schema's URL to swagger.io, and the CSP allows no image from there.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    # Distinct names for the several "status" enums (runs, effects, approval requests).
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "runs.models.Run.Status",
        "EffectStatusEnum": "runs.models.Effect.Status",
        "ApprovalStatusEnum": "approvals.models.ApprovalRequest.Status",
        "CheckpointStatusEnum": ["running", "suspended", "completed"],
        "WebhookEventTypeEnum": "notifications.models.EventType",
        "WebhookDeliveryStatusEnum": "notifications.models.OutboxMessage.Status",
    },
    # The events endpoint (an async view outside DRF) and the stream's part types are put in the document by
    # runs.api.schema's hooks, so /api/schema/ and `manage.py spectacular` write the same document.
    "PREPROCESSING_HOOKS": ["runs.api.schema.run_events_documented"],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",  # the default, kept
        "runs.api.schema.empty_query_values_documented",
        "runs.api.schema.stream_parts_documented",
    ],
}

# How log lines are written: "plain" text, or "json", one object per line with the run, leg and epoch of the leg
# that wrote it and secrets redacted (observability.logs).
DEUZ_LOG_FORMAT = env_choice("DEUZ_LOG_FORMAT", choices=("plain", "json"), default="plain")

# Everything to the console (the process manager keeps it); the `deuz` logger at INFO.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "observability.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": DEUZ_LOG_FORMAT},
    },
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "deuz": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}
