"""Request bodies that must never make an API endpoint answer 500, and a helper that posts them all."""

from __future__ import annotations

import json

USER_MESSAGE = {"role": "user", "content": "Please reimburse exp-1042."}

HOSTILE_BODIES = [
    None, [], "string", 12345, True, {},
    {"agent": None, "messages": None, "run_id": None},
    {"agent": [], "messages": {}},
    {"agent": {"$bytes": "AA=="}, "messages": "hi"},
    {"agent": "reimbursement", "messages": [None]},
    {"agent": "reimbursement", "messages": [[]]},
    {"agent": "reimbursement", "messages": [{"role": None, "content": None}]},
    {"agent": "reimbursement", "messages": [{"role": ["user"], "content": {"text": "hi"}}]},
    {"agent": "reimbursement", "messages": [{"role": "user", "content": [None]}]},
    {"agent": "reimbursement", "messages": [{"role": "user", "content": [{"type": None}]}]},
    {"agent": "reimbursement", "messages": [{"role": "user", "content": [{"type": {"a": 1}, "text": "x"}]}]},
    {"agent": "reimbursement", "messages": [{"role": "user", "content": [{"type": "text", "text": None}]}]},
    {"agent": "reimbursement", "messages": [{"role": "tool", "content": [{"type": "tool_result"}]}]},
    {"agent": "reimbursement", "messages": [{"role": "assistant", "content": [
        {"type": "tool_call", "tool_call_id": 1, "tool_name": {}, "input": []}]}]},
    {"agent": "reimbursement", "messages": [{"role": "tool", "content": [
        {"type": "tool_result", "tool_call_id": "c", "tool_name": "t", "output": None, "is_error": "yes"}]}]},
    {"agent": 10**30, "messages": [USER_MESSAGE], "run_id": 10**30},
    {"agent": "reimbursement", "messages": [USER_MESSAGE], "run_id": -1.5e300},
    {"agent": "reimbursement", "messages": [USER_MESSAGE], "run_id": True},
    {"agent": "r\u00e9imbursement\u202e", "messages": [USER_MESSAGE]},
    {"agent": "\x00", "messages": [USER_MESSAGE]},
    {"agent": "x" * 100_000, "messages": [USER_MESSAGE]},
    {"agent": "reimbursement", "messages": [{"role": "user", "content": "\x00\uffff\U0001f600"}], "run_id": "fz-1"},
    {"agent": "reimbursement", "messages": [USER_MESSAGE], "run_id": "a\x00b"},
    {"agent": "reimbursement", "messages": [USER_MESSAGE], "run_id": "\U0001f600"},
    {"agent": "coder", "messages": [USER_MESSAGE] * 201},
    {"agent": "coder", "messages": [{"role": "assistant", "content": [
        {"type": "tool_call", "tool_call_id": "c", "tool_name": "t", "input": {"$bytes": "not base64!"}}]}],
     "run_id": "fz-2"},
    {"agent": "reimbursement", "messages": [{"role": "user", "content": "hi", **{f"k{i}": i for i in range(2000)}}]},
    {"agent": "reimbursement", "messages": [{"role": "user", "content": [{"type": ["text"], "text": "x"}]}]},
    {"agent": "reimbursement", "messages": [{"role": {"tool": 1}, "content": [{"type": "text", "text": "x"}]}]},
    {"agent": "reimbursement", "messages": [{"role": "user", "content": [{"type": "text", "text": "x", "": None}]}]},
    {"agent": "reimbursement", "messages": [{"role": "user", "content": [[{"type": "text", "text": "x"}]]}]},
    {"agent": "reimbursement", "messages": [{"role": "user", "content": {"type": "text", "text": "x"}}]},
    {"agent": "reimbursement", "messages": [{"role": "user", "content": "x" * 40}] * 200, "run_id": "fz-3"},
    {"agent": ["reimbursement"], "messages": [USER_MESSAGE]},
    {"approved": None, "token": None, "reason": None},
    {"approved": "true", "token": 5, "reason": 5},
    {"approved": [], "token": [], "reason": {}},
    {"approved": True, "token": "v1.\x00.\x00"},
    {"approved": True, "token": "v1." + "A" * 5000 + ".x"},
    {"approved": True, "token": "", "reason": "x" * 3000},
    {"approved": 1e308, "token": "a.b.c"},
    {"approved": False, "token": "v1.e30.AAAA", "reason": "\U0001f600" * 10},
    [{"approved": True, "token": "x"}],
    {"approved": {"approved": True}, "token": {"token": "x"}},
]

HOSTILE_TEXTS = [
    b'{"agent": "reimbursement", "messages": [{"role": "user", "content": "\\ud800"}]}',
    b'{"\\udfff": 1}',
    b'{"approved": NaN, "token": Infinity}',
    b'{"agent": 1e999, "approved": -1e999}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 40 + b"1" + b"}" * 40,
    b'{"agent": ' + b"9" * 5000 + b"}",
    b'{"agent": "reimbursement",',
    b"\xff\xfe\x00garbage",
    b"",
    b"   ",
    b'{"approved": true, "token": "x", "token": "y"}',
]


def fuzz(client, path):
    """Post every hostile body to ``path``; the answers that were 500s or not JSON."""
    client.raise_request_exception = False
    bad = []
    for body in HOSTILE_BODIES:
        response = client.post(path, json.dumps(body), content_type="application/json")
        if response.status_code >= 500 or response["Content-Type"] != "application/json":
            bad.append((repr(body)[:120], response.status_code))
    for text in HOSTILE_TEXTS:
        response = client.generic("POST", path, text, content_type="application/json")
        if response.status_code >= 500 or response["Content-Type"] != "application/json":
            bad.append((repr(text)[:120], response.status_code))
    for content_type in ("application/json; charset=bz2_codec", "application/json; charset=nope", "text/plain",
                         "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        response = client.generic("POST", path, b'{"a": 1}', content_type=content_type)
        if response.status_code >= 500:
            bad.append((content_type, response.status_code))
    return bad
