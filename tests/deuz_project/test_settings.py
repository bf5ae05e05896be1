"""Settings come from the environment; each case imports them in a fresh interpreter."""

from __future__ import annotations

import json

import pytest

from tests.environment import PRODUCTION_ENV

# Loads the settings (as start-up does) and prints the values the tests look at.
SHOW_SETTINGS = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps({
    "DEBUG": settings.DEBUG,
    "SECRET_KEY": settings.SECRET_KEY,
    "DEUZ_APPROVAL_SECRET": settings.DEUZ_APPROVAL_SECRET,
    "ALLOWED_HOSTS": settings.ALLOWED_HOSTS,
    "DEUZ_LEASE_SECONDS": settings.DEUZ_LEASE_SECONDS,
    "DEUZ_APPROVAL_MAX_AGE_SECONDS": settings.DEUZ_APPROVAL_MAX_AGE_SECONDS,
    "DEUZ_DEMO_DELAY_MS": settings.DEUZ_DEMO_DELAY_MS,
    "CHANNEL_BACKEND": settings.CHANNEL_LAYERS["default"]["BACKEND"],
    "CHANNEL_CONFIG": settings.CHANNEL_LAYERS["default"].get("CONFIG"),
    "DATABASE": {k: v for k, v in settings.DATABASES["default"].items() if k != "PASSWORD"},
    "CSRF_TRUSTED_ORIGINS": settings.CSRF_TRUSTED_ORIGINS,
    "SECURE_PROXY_SSL_HEADER": settings.SECURE_PROXY_SSL_HEADER,
    "SECURE_SSL_REDIRECT": settings.SECURE_SSL_REDIRECT,
    "SESSION_COOKIE_SECURE": settings.SESSION_COOKIE_SECURE,
    "CSRF_COOKIE_SECURE": settings.CSRF_COOKIE_SECURE,
    "SECURE_HSTS_SECONDS": settings.SECURE_HSTS_SECONDS,
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": settings.SECURE_HSTS_INCLUDE_SUBDOMAINS,
    "SECURE_HSTS_PRELOAD": settings.SECURE_HSTS_PRELOAD,
    "CSP_ENFORCED": bool(settings.SECURE_CSP),
    "CSP_REPORT_ONLY": bool(settings.SECURE_CSP_REPORT_ONLY),
}, default=str))
"""

def load_settings(run_python, **env: str) -> dict:
    result = run_python(SHOW_SETTINGS, **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def start_up_error(run_python, **env: str) -> str:
    """What start-up printed on its way out when the settings refused ``env``; fails if they were accepted."""
    result = run_python(SHOW_SETTINGS, **env)
    assert result.returncode != 0, result.stdout
    return result.stderr


def test_debug_off_without_approval_secret_refuses_to_start(run_python):
    env = {**PRODUCTION_ENV}
    del env["DEUZ_APPROVAL_SECRET"]
    error = start_up_error(run_python, **env)
    assert "ImproperlyConfigured" in error and "DEUZ_APPROVAL_SECRET" in error


def test_debug_off_with_empty_approval_secret_refuses_to_start(run_python):
    assert "DEUZ_APPROVAL_SECRET" in start_up_error(run_python, **{**PRODUCTION_ENV, "DEUZ_APPROVAL_SECRET": ""})


def test_debug_off_without_secret_key_refuses_to_start(run_python):
    env = {**PRODUCTION_ENV}
    del env["DJANGO_SECRET_KEY"]
    assert "DJANGO_SECRET_KEY" in start_up_error(run_python, **env)


def test_debug_off_with_both_secrets_starts_with_them(run_python):
    loaded = load_settings(run_python, **PRODUCTION_ENV)
    assert loaded["DEBUG"] is False
    assert loaded["SECRET_KEY"] == PRODUCTION_ENV["DJANGO_SECRET_KEY"]
    assert loaded["DEUZ_APPROVAL_SECRET"] == PRODUCTION_ENV["DEUZ_APPROVAL_SECRET"]


def test_embedded_defaults(run_python):
    loaded = load_settings(run_python)
    assert loaded["DEBUG"] is True
    assert "insecure" in loaded["DEUZ_APPROVAL_SECRET"]
    assert loaded["ALLOWED_HOSTS"] == ["localhost", "127.0.0.1", "[::1]"]
    assert loaded["DEUZ_LEASE_SECONDS"] == 15
    assert loaded["DEUZ_APPROVAL_MAX_AGE_SECONDS"] == 86400
    assert loaded["DEUZ_DEMO_DELAY_MS"] == 20


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes", "on"])
def test_debug_accepts_true_spellings(run_python, value):
    assert load_settings(run_python, DEBUG=value)["DEBUG"] is True


@pytest.mark.parametrize("value", ["0", "false", "False", "no", "off"])
def test_debug_accepts_false_spellings(run_python, value):
    loaded = load_settings(run_python, **{**PRODUCTION_ENV, "DEBUG": value})
    assert loaded["DEBUG"] is False


def test_redis_url_selects_the_redis_channel_layer(run_python):
    loaded = load_settings(run_python, REDIS_URL="redis://cache.example:6379/3")
    assert loaded["CHANNEL_BACKEND"] == "runs.wire.channel_layers.RedisPubSubChannelLayer"
    assert loaded["CHANNEL_CONFIG"] == {"hosts": ["redis://cache.example:6379/3"]}


def test_without_redis_url_the_channel_layer_is_in_memory(run_python):
    loaded = load_settings(run_python)
    assert loaded["CHANNEL_BACKEND"] == "runs.wire.channel_layers.LoopSafeInMemoryChannelLayer"


def test_postgres_database_url_selects_postgresql(run_python):
    loaded = load_settings(run_python, DATABASE_URL="postgres://deuz:pw@db.example:5433/deuz")
    database = loaded["DATABASE"]
    assert database["ENGINE"] == "django.db.backends.postgresql"
    assert (database["HOST"], database["PORT"], database["NAME"]) == ("db.example", 5433, "deuz")
    assert database["CONN_HEALTH_CHECKS"] is True


def test_default_database_is_sqlite_in_wal_mode_with_a_lock_timeout(run_python):
    database = load_settings(run_python)["DATABASE"]
    assert database["ENGINE"] == "django.db.backends.sqlite3"
    assert database["NAME"].endswith("db.sqlite3")
    assert database["OPTIONS"]["timeout"] == 20
    assert database["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in database["OPTIONS"]["init_command"]


def test_allowed_hosts_is_comma_separated(run_python):
    loaded = load_settings(run_python, ALLOWED_HOSTS="deuz.example, api.deuz.example ,")
    assert loaded["ALLOWED_HOSTS"] == ["deuz.example", "api.deuz.example"]


def test_integer_settings_are_read(run_python):
    names = ("DEUZ_LEASE_SECONDS", "DEUZ_APPROVAL_MAX_AGE_SECONDS", "DEUZ_DEMO_DELAY_MS")
    loaded = load_settings(run_python, **dict(zip(names, ("30", "600", "0"), strict=True)))
    assert [loaded[name] for name in names] == [30, 600, 0]


def test_a_malformed_encryption_key_is_rejected_naming_the_variable(run_python):
    assert "DEUZ_ENCRYPTION_KEYS key #1" in start_up_error(run_python, DEUZ_ENCRYPTION_KEYS="not-a-key")


def test_a_real_demo_model_needs_its_api_key(run_python):
    assert "ANTHROPIC_API_KEY" in start_up_error(run_python, DEUZ_DEMO_MODEL="anthropic:claude-sonnet-4-6")


def test_an_unknown_demo_model_provider_is_rejected(run_python):
    assert "DEUZ_DEMO_MODEL" in start_up_error(run_python, DEUZ_DEMO_MODEL="mystery:model")


# Production as an operator starts it: DEBUG off and the secrets, nothing about transport security.
BARE_PRODUCTION_ENV = {
    key: value for key, value in PRODUCTION_ENV.items() if key not in ("DEUZ_SSL_REDIRECT", "DEUZ_SECURE_COOKIES")
}


def test_transport_security_is_on_by_default_without_debug(run_python):
    loaded = load_settings(run_python, **BARE_PRODUCTION_ENV)
    assert loaded["SECURE_SSL_REDIRECT"] is True
    assert loaded["SESSION_COOKIE_SECURE"] is True and loaded["CSRF_COOKIE_SECURE"] is True
    assert loaded["SECURE_HSTS_SECONDS"] == 31_536_000
    assert loaded["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True
    assert loaded["SECURE_HSTS_PRELOAD"] is False  # opt-in: the preload list is hard to leave
    assert loaded["SECURE_PROXY_SSL_HEADER"] is None  # opt-in: only a proxy makes the header trustworthy


def test_the_content_security_policy_is_enforced_without_debug(run_python):
    loaded = load_settings(run_python, **BARE_PRODUCTION_ENV)
    assert (loaded["CSP_ENFORCED"], loaded["CSP_REPORT_ONLY"]) == (True, False)


def test_debug_relaxes_transport_security_for_plain_http(run_python):
    loaded = load_settings(run_python)
    assert loaded["SECURE_SSL_REDIRECT"] is False
    assert loaded["SESSION_COOKIE_SECURE"] is False and loaded["CSRF_COOKIE_SECURE"] is False
    assert loaded["SECURE_HSTS_SECONDS"] == 0


def test_debug_reports_content_security_policy_violations_without_enforcing(run_python):
    loaded = load_settings(run_python)
    assert (loaded["CSP_ENFORCED"], loaded["CSP_REPORT_ONLY"]) == (False, True)


def test_csp_report_only_can_be_chosen_in_production(run_python):
    loaded = load_settings(run_python, **BARE_PRODUCTION_ENV, DEUZ_CSP_REPORT_ONLY="1")
    assert (loaded["CSP_ENFORCED"], loaded["CSP_REPORT_ONLY"]) == (False, True)


def test_transport_security_settings_are_read(run_python):
    loaded = load_settings(
        run_python,
        **BARE_PRODUCTION_ENV,
        DEUZ_SSL_REDIRECT="0",
        DEUZ_SECURE_COOKIES="0",
        DEUZ_HSTS_SECONDS="600",
        DEUZ_HSTS_INCLUDE_SUBDOMAINS="0",
    )
    assert loaded["SECURE_SSL_REDIRECT"] is False
    assert loaded["SESSION_COOKIE_SECURE"] is False and loaded["CSRF_COOKIE_SECURE"] is False
    assert (loaded["SECURE_HSTS_SECONDS"], loaded["SECURE_HSTS_INCLUDE_SUBDOMAINS"]) == (600, False)


def test_the_proxy_ssl_header_is_x_forwarded_proto_when_asked_for(run_python):
    loaded = load_settings(run_python, DEUZ_PROXY_SSL_HEADER="1")
    assert loaded["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]


def test_hsts_preload_is_read(run_python):
    loaded = load_settings(run_python, **BARE_PRODUCTION_ENV, DEUZ_HSTS_PRELOAD="1")
    assert loaded["SECURE_HSTS_PRELOAD"] is True


@pytest.mark.parametrize(
    "env",
    [{"DEUZ_HSTS_SECONDS": "600"}, {"DEUZ_HSTS_INCLUDE_SUBDOMAINS": "0"}],
    ids=["short max-age", "without subdomains"],
)
def test_hsts_preload_below_the_lists_requirements_is_rejected(run_python, env):
    error = start_up_error(run_python, **BARE_PRODUCTION_ENV, DEUZ_HSTS_PRELOAD="1", **env)
    assert "ImproperlyConfigured: DEUZ_HSTS_PRELOAD" in error


def test_csrf_trusted_origins_is_comma_separated(run_python):
    loaded = load_settings(run_python, CSRF_TRUSTED_ORIGINS="https://deuz.example, https://*.deuz.example:8443,")
    assert loaded["CSRF_TRUSTED_ORIGINS"] == ["https://deuz.example", "https://*.deuz.example:8443"]


def test_csrf_trusted_origins_defaults_to_none(run_python):
    assert load_settings(run_python)["CSRF_TRUSTED_ORIGINS"] == []


@pytest.mark.parametrize("origin", ["deuz.example", "https://deuz.example/", "https://deuz.example/console", "ftp://x"])
def test_a_csrf_trusted_origin_that_is_not_an_origin_is_rejected_naming_it(run_python, origin):
    error = start_up_error(run_python, CSRF_TRUSTED_ORIGINS=f"https://ok.example,{origin}")
    assert "ImproperlyConfigured: CSRF_TRUSTED_ORIGINS" in error and repr(origin) in error


# A malformed value stops start-up, naming its variable.
MALFORMED = [
    pytest.param({"DEBUG": "maybe"}, "DEBUG", id="DEBUG-neither-true-nor-false"),
    pytest.param({"DATABASE_URL": "nosuchdb://x/y"}, "DATABASE_URL", id="DATABASE_URL-unreadable"),
    *(pytest.param({name: "abc"}, name, id=f"{name}-not-an-integer")
      for name in ("DEUZ_LEASE_SECONDS", "DEUZ_APPROVAL_MAX_AGE_SECONDS", "DEUZ_DEMO_DELAY_MS")),
    pytest.param({"DEUZ_DIRECT_CONNECTIONS": "0"}, "DEUZ_DIRECT_CONNECTIONS", id="DEUZ_DIRECT_CONNECTIONS-zero"),
    pytest.param({"DEUZ_LEASE_SECONDS": "0"}, "DEUZ_LEASE_SECONDS", id="DEUZ_LEASE_SECONDS-zero"),
    *(pytest.param({name: "sometimes"}, name, id=f"{name}-not-a-switch")
      for name in ("DEUZ_PROXY_SSL_HEADER", "DEUZ_SSL_REDIRECT", "DEUZ_SECURE_COOKIES", "DEUZ_HSTS_INCLUDE_SUBDOMAINS",
                   "DEUZ_HSTS_PRELOAD", "DEUZ_CSP_REPORT_ONLY")),
    *(pytest.param({"DEUZ_HSTS_SECONDS": value}, "DEUZ_HSTS_SECONDS", id=f"DEUZ_HSTS_SECONDS-{value}")
      for value in ("-1", "a year")),
]


@pytest.mark.parametrize(("env", "name"), MALFORMED)
def test_a_malformed_value_stops_start_up_naming_its_variable(run_python, env, name):
    assert f"ImproperlyConfigured: {name}" in start_up_error(run_python, **env)
