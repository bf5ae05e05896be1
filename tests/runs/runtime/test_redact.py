"""Redaction of secrets from text that leaves the process (error parts, tool errors, logs)."""

from __future__ import annotations

import pytest

from runs.runtime.redact import REDACTED, redact


def test_redacted_marker_is_visible_text():
    assert REDACTED == "[redacted]"


def test_strips_an_openai_style_key():
    assert redact("calling the API with sk-abc123DEF456ghi789 failed") == "calling the API with [redacted] failed"


def test_strips_a_project_key():
    assert redact("key sk-proj-Ab12_Cd34-Ef56Gh78 rejected") == "key [redacted] rejected"


def test_strips_an_anthropic_key_whole():
    text = "key sk-ant-api03-AbCdEf_123-xyz0987654321 leaked"
    assert redact(text) == "key [redacted] leaked"


def test_strips_a_bearer_token_and_keeps_the_scheme():
    text = "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig rejected"
    assert redact(text) == "Authorization: Bearer [redacted] rejected"


def test_strips_a_bearer_token_case_insensitively():
    assert redact("authorization: bearer abcdefghijklmnop1234") == "authorization: bearer [redacted]"


def test_strips_an_api_key_query_parameter_and_keeps_the_rest_of_the_url():
    assert redact("GET /v1?api_key=abcd1234efgh&page=2") == "GET /v1?api_key=[redacted]&page=2"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("OPENAI_API_KEY=abc", "OPENAI_API_KEY=[redacted]"),
        ('api-key: "quoted value here" set', "api-key: [redacted] set"),
        ("apikey = 'single quoted' set", "apikey = [redacted] set"),
        ("client_secret=xyz789; next", "client_secret=[redacted]; next"),
    ],
)
def test_strips_secret_looking_key_value_pairs(text, expected):
    assert redact(text) == expected


def test_strips_a_password_after_a_colon():
    assert redact("config password: hunter2, user: ada") == "config password: [redacted], user: ada"


def test_strips_a_password_after_an_equals_sign():
    assert redact("PASSWORD=hunter2") == "PASSWORD=[redacted]"


def test_strips_the_password_of_url_credentials_and_keeps_the_host():
    text = "connect postgres://ada:pw@db.example.com:5432/app failed"
    assert redact(text) == "connect postgres://ada:[redacted]@db.example.com:5432/app failed"


def test_strips_url_credentials_of_any_scheme():
    assert redact("redis://default:s3cr3t@cache:6379/0") == "redis://default:[redacted]@cache:6379/0"


def test_strips_a_literal_secret_passed_in():
    assert redact("the code is swordfish42 ok", ["swordfish42"]) == "the code is [redacted] ok"


def test_strips_every_occurrence_of_a_literal_secret():
    assert redact("swordfish42/swordfish42", ("swordfish42",)) == "[redacted]/[redacted]"


def test_strips_each_of_several_literal_secrets():
    assert redact("alpha-one and beta-two", ["alpha-one", "beta-two"]) == "[redacted] and [redacted]"


def test_a_literal_secret_is_not_redacted_when_not_passed():
    assert redact("the code is swordfish42 ok") == "the code is swordfish42 ok"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "The weather in Paris is 21 degrees; see https://example.com/path?q=1 for details.",
        "Run task-scheduler and desk-lamp-controller, then ask the risk-team.",
        "Passwords must be rotated every 90 days. The token count was 12.",
        "Email ada@example.com about the key: results, and mailto:bob@example.org.",
        "Unicode stays: héllo ✓ 日本語",
    ],
)
def test_leaves_ordinary_text_unchanged(text):
    assert redact(text) == text


def test_leaves_ordinary_text_around_a_redaction_unchanged():
    assert redact("before sk-abc123DEF456ghi789 after, and more") == "before [redacted] after, and more"
