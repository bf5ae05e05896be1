"""The approval signer: ``v1.<payload>.<mac>`` tokens, HMAC-SHA256, and a ``verify`` that never raises."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runs.runtime.durable import create_approval_signer

SECRET = "s3cr3t-ключ-é"  # non-ASCII, so the test also pins "a str secret is used as its UTF-8 bytes"
ISSUED_AT = 1_700_000_000_000
REQUEST = {
    "approval_id": "appr_1",
    "tool_call_id": "call_1",
    "tool_name": "send_email",
    "input": {"to": "ada@example.com", "body": "héllo ✓", "n": [1, 2.5, None, True]},
    "agent_path": ["root", "mailer"],
}
UNPADDED_BASE64URL = re.compile(r"^[A-Za-z0-9_-]+$")


def fixed_clock(ms: int) -> SimpleNamespace:
    return SimpleNamespace(now=lambda: ms)


def make_signer(*, secret: str | bytes = SECRET, now: int = ISSUED_AT):
    return create_approval_signer(secret=secret, clock=fixed_clock(now))


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def forge(body: str, *, secret: bytes = SECRET.encode("utf-8"), version: str = "v1") -> str:
    """A token for an arbitrary payload part, MACed correctly with ``secret``: only the payload is wrong."""
    signed = f"{version}.{body}"
    mac = hmac.new(secret, signed.encode("ascii"), hashlib.sha256).digest()
    return f"{signed}.{b64url(mac)}"


# Signing


def test_token_is_v1_then_two_unpadded_base64url_parts():
    # Requests of several lengths, so at least one would need "=" padding if it were kept.
    for filler in ["", "a", "ab", "abc", "???>>>"]:
        token = make_signer().sign({**REQUEST, "filler": filler}, run_id="run-42")
        version, payload, mac = token.split(".")
        assert version == "v1"
        assert UNPADDED_BASE64URL.match(payload), payload
        assert UNPADDED_BASE64URL.match(mac), mac


def test_payload_is_the_request_without_token_plus_bound_run_id_and_issued_at():
    token = make_signer().sign({**REQUEST, "token": "old-token"}, run_id="run-42")
    payload = json.loads(b64url_decode(token.split(".")[1]))
    assert payload == {**REQUEST, "run_id": "run-42", "issued_at": ISSUED_AT}


def test_payload_has_no_run_id_when_the_token_is_not_bound():
    token = make_signer().sign(REQUEST)
    payload = json.loads(b64url_decode(token.split(".")[1]))
    assert payload == {**REQUEST, "issued_at": ISSUED_AT}


def test_sign_does_not_mutate_the_request():
    request = {**REQUEST, "token": "old-token"}
    make_signer().sign(request, run_id="run-42")
    assert request == {**REQUEST, "token": "old-token"}


def test_mac_is_hmac_sha256_over_version_and_payload_with_the_utf8_secret():
    token = make_signer().sign(REQUEST, run_id="run-42")
    version, payload, mac = token.split(".")
    expected = hmac.new(SECRET.encode("utf-8"), f"{version}.{payload}".encode("ascii"), hashlib.sha256).digest()
    assert b64url_decode(mac) == expected


def test_bytes_secret_is_used_as_is():
    secret = b"\x00\xffraw-key-bytes"
    token = make_signer(secret=secret).sign(REQUEST)
    version, payload, mac = token.split(".")
    expected = hmac.new(secret, f"{version}.{payload}".encode("ascii"), hashlib.sha256).digest()
    assert b64url_decode(mac) == expected
    assert make_signer(secret=secret).verify(token) is not None


def test_str_secret_and_its_utf8_bytes_are_the_same_key():
    token = make_signer(secret=SECRET).sign(REQUEST)
    assert make_signer(secret=SECRET.encode("utf-8")).verify(token) is not None


@pytest.mark.parametrize("secret", ["", b""], ids=["empty-str", "empty-bytes"])
def test_empty_secret_is_rejected(secret):
    with pytest.raises(ValueError, match="secret"):
        create_approval_signer(secret=secret)


def test_repr_does_not_reveal_the_secret():
    signer = make_signer(secret="hunter2-very-secret")
    for shown in (repr(signer), str(signer), f"{signer!r}"):
        assert "hunter2" not in shown
        assert "very-secret" not in shown


# Verifying


def test_verify_returns_the_payload_of_a_valid_token():
    signer = make_signer()
    token = signer.sign(REQUEST, run_id="run-42")
    assert signer.verify(token) == {**REQUEST, "run_id": "run-42", "issued_at": ISSUED_AT}


def test_verify_rejects_a_payload_swapped_for_another_request():
    signer = make_signer()
    version, _, mac = signer.sign(REQUEST, run_id="run-42").split(".")
    forged_payload = b64url(json.dumps({**REQUEST, "approval_id": "appr_2", "issued_at": ISSUED_AT}).encode())
    assert signer.verify(f"{version}.{forged_payload}.{mac}") is None


def test_verify_rejects_a_payload_with_one_character_changed():
    signer = make_signer()
    version, payload, mac = signer.sign(REQUEST).split(".")
    flipped = payload[:10] + ("A" if payload[10] != "A" else "B") + payload[11:]
    assert signer.verify(f"{version}.{flipped}.{mac}") is None


def test_verify_rejects_a_tampered_mac():
    signer = make_signer()
    version, payload, mac = signer.sign(REQUEST).split(".")
    flipped = ("A" if mac[0] != "A" else "B") + mac[1:]
    assert signer.verify(f"{version}.{payload}.{flipped}") is None


def test_verify_rejects_a_truncated_mac():
    signer = make_signer()
    token = signer.sign(REQUEST)
    assert signer.verify(token[:-1]) is None


def test_verify_rejects_a_token_signed_with_another_secret():
    token = make_signer(secret="another-secret").sign(REQUEST)
    assert make_signer().verify(token) is None


@pytest.mark.parametrize("garbled", ["", "garbage", "v1..", "...", "v1.%%%.###", "😀.😀.😀"])
def test_verify_returns_none_for_a_garbled_string(garbled):
    assert make_signer().verify(garbled) is None


@pytest.mark.parametrize("not_a_string", [None, 123, 1.5, b"v1.abc.def", {"token": "v1.abc.def"}, ["v1"]])
def test_verify_returns_none_for_a_non_string(not_a_string):
    assert make_signer().verify(not_a_string) is None


def test_verify_returns_none_for_the_bytes_of_a_valid_token():
    signer = make_signer()
    token = signer.sign(REQUEST)
    assert signer.verify(token.encode("ascii")) is None


def test_verify_rejects_another_version_prefix_even_with_a_valid_mac():
    signer = make_signer()
    payload = signer.sign(REQUEST).split(".")[1]
    assert signer.verify(forge(payload, version="v2")) is None
    assert signer.verify(forge(payload, version="V1")) is None


def test_verify_rejects_a_token_with_its_prefix_replaced():
    signer = make_signer()
    token = signer.sign(REQUEST)
    assert signer.verify("v2" + token[2:]) is None


def test_verify_rejects_too_many_dots():
    signer = make_signer()
    token = signer.sign(REQUEST)
    version, payload, mac = token.split(".")
    assert signer.verify(token + ".") is None
    assert signer.verify(f"{version}.{payload}.{mac}.{mac}") is None
    assert signer.verify(f"{version}..{payload}.{mac}") is None


def test_verify_rejects_too_few_dots():
    signer = make_signer()
    version, payload, mac = signer.sign(REQUEST).split(".")
    assert signer.verify(f"{version}.{payload}") is None
    assert signer.verify(f"{version}{payload}.{mac}") is None
    assert signer.verify(f"{version}.{payload}{mac}") is None


@pytest.mark.parametrize("body", ["!!!!", "a", "abcde", "@@==", "ab$d"])
def test_verify_returns_none_for_a_payload_that_is_not_base64_even_with_a_valid_mac(body):
    assert make_signer().verify(forge(body)) is None


@pytest.mark.parametrize("json_text", ["[1,2]", '"x"', "1", "null", "true", "{", "not json"])
def test_verify_returns_none_when_the_mac_verifies_but_the_payload_is_not_a_json_object(json_text):
    signer = make_signer()
    token = forge(b64url(json_text.encode("utf-8")))
    assert signer.verify(token) is None


def test_forged_helper_builds_tokens_verify_accepts_for_an_object_payload():
    # Guards the test above: the same construction with a JSON object does verify.
    body = b64url(json.dumps({"approval_id": "appr_1", "issued_at": ISSUED_AT}).encode())
    assert make_signer().verify(forge(body)) == {"approval_id": "appr_1", "issued_at": ISSUED_AT}


# Expiry


def test_token_whose_age_equals_max_age_is_expired():
    token = make_signer(now=ISSUED_AT).sign(REQUEST)
    assert make_signer(now=ISSUED_AT + 60_000).verify(token, max_age_ms=60_000) is None


def test_token_just_younger_than_max_age_is_valid():
    token = make_signer(now=ISSUED_AT).sign(REQUEST)
    payload = make_signer(now=ISSUED_AT + 59_999).verify(token, max_age_ms=60_000)
    assert payload == {**REQUEST, "issued_at": ISSUED_AT}


def test_token_older_than_max_age_is_expired():
    token = make_signer(now=ISSUED_AT).sign(REQUEST)
    assert make_signer(now=ISSUED_AT + 10 * 60_000).verify(token, max_age_ms=60_000) is None


def test_without_max_age_a_token_never_expires():
    token = make_signer(now=ISSUED_AT).sign(REQUEST)
    ten_years_ms = 10 * 365 * 24 * 3600 * 1000
    assert make_signer(now=ISSUED_AT + ten_years_ms).verify(token) is not None


def test_issued_at_comes_from_the_injected_clock():
    token = make_signer(now=123_456).sign(REQUEST)
    assert make_signer(now=0).verify(token)["issued_at"] == 123_456


# Never raises

_SIGNER = make_signer()
_TOKEN_CHARS = st.characters(codec="utf-8")


@given(st.text())
def test_verify_never_raises_on_random_text(token):
    assert _SIGNER.verify(token) is None


@given(st.binary())
def test_verify_never_raises_on_random_bytes(token):
    assert _SIGNER.verify(token) is None


@given(st.text(_TOKEN_CHARS), st.text(_TOKEN_CHARS), st.one_of(st.none(), st.integers()))
def test_verify_never_raises_on_random_v1_shaped_tokens(payload, mac, max_age_ms):
    assert _SIGNER.verify(f"v1.{payload}.{mac}", max_age_ms=max_age_ms) is None


@given(st.binary(), st.one_of(st.none(), st.integers()))
def test_verify_never_raises_on_random_payload_bytes_with_a_valid_mac(raw, max_age_ms):
    # The MAC is right, so the decoding of whatever the payload holds is what gets exercised.
    payload = _SIGNER.verify(forge(b64url(raw)), max_age_ms=max_age_ms)
    assert payload is None or isinstance(payload, dict)
