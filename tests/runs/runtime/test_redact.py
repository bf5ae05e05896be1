"""Redaction of secrets from text that leaves the process (error parts, tool errors, logs)."""

from __future__ import annotations

import pytest

from runs.runtime.redact import REDACTED, redact


def test_redacted_marker_is_visible_text():
    assert REDACTED == "[redacted]"


# Each shape of secret the redaction knows, in text, and what is left of the text.
SECRETS_IN_TEXT = [
    pytest.param("calling the API with sk-abc123DEF456ghi789 failed", "calling the API with [redacted] failed",
                 id="an-openai-style-key"),
    pytest.param("key sk-proj-Ab12_Cd34-Ef56Gh78 rejected", "key [redacted] rejected", id="a-project-key"),
    pytest.param("key sk-ant-api03-AbCdEf_123-xyz0987654321 leaked", "key [redacted] leaked",
                 id="an-anthropic-key-whole"),
    pytest.param("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig rejected",
                 "Authorization: Bearer [redacted] rejected", id="a-bearer-token-keeping-the-scheme"),
    pytest.param("authorization: bearer abcdefghijklmnop1234", "authorization: bearer [redacted]",
                 id="a-bearer-token-in-lower-case"),
    pytest.param("GET /v1?api_key=abcd1234efgh&page=2", "GET /v1?api_key=[redacted]&page=2",
                 id="an-api-key-query-parameter-keeping-the-rest-of-the-url"),
    pytest.param("OPENAI_API_KEY=abc", "OPENAI_API_KEY=[redacted]", id="a-key-value-pair"),
    pytest.param('api-key: "quoted value here" set', "api-key: [redacted] set", id="a-double-quoted-value"),
    pytest.param("apikey = 'single quoted' set", "apikey = [redacted] set", id="a-single-quoted-value"),
    pytest.param("client_secret=xyz789; next", "client_secret=[redacted]; next", id="a-client-secret"),
    pytest.param("config password: hunter2, user: ada", "config password: [redacted], user: ada",
                 id="a-password-after-a-colon"),
    pytest.param("PASSWORD=hunter2", "PASSWORD=[redacted]", id="a-password-after-an-equals-sign"),
    pytest.param("connect postgres://ada:pw@db.example.com:5432/app failed",
                 "connect postgres://ada:[redacted]@db.example.com:5432/app failed",
                 id="the-password-of-url-credentials-keeping-the-host"),
    pytest.param("redis://default:s3cr3t@cache:6379/0", "redis://default:[redacted]@cache:6379/0",
                 id="url-credentials-of-any-scheme"),
]


@pytest.mark.parametrize(("text", "expected"), SECRETS_IN_TEXT)
def test_strips(text, expected):
    assert redact(text) == expected


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
