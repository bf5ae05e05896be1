"""Request bodies as daphne hands them to Django's ASGI handler: chunked, without a Content-Length (issue 12)."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.db import connections

from runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

USER_MESSAGE = {"role": "user", "content": "Please reimburse exp-1042."}


async def post_chunked(path: str, chunks: list[bytes], *, token: str) -> tuple[int, dict]:
    """POST ``chunks`` as one http.request message each, with Transfer-Encoding: chunked and no Content-Length."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [
            (b"host", b"testserver"), (b"content-type", b"application/json"), (b"transfer-encoding", b"chunked"),
            (b"authorization", f"Token {token}".encode()),
        ],
        "client": ("127.0.0.1", 50000), "server": ("testserver", 80),
    }
    incoming = [{"type": "http.request", "body": chunk, "more_body": index < len(chunks) - 1}
                for index, chunk in enumerate(chunks)]
    sent: list[dict] = []

    async def receive() -> dict:
        if incoming:
            return incoming.pop(0)
        await asyncio.Event().wait()  # the client stays connected; the handler cancels this once it answered

    async def send(message: dict) -> None:
        sent.append(message)

    try:
        await ASGIHandler()(scope, receive, send)
    finally:
        # The view ran in asgiref's thread, whose connection would keep PostgreSQL from dropping the test database.
        await sync_to_async(connections.close_all)()
    status = next(message["status"] for message in sent if message["type"] == "http.response.start")
    body = b"".join(message.get("body", b"") for message in sent if message["type"] == "http.response.body")
    return status, json.loads(body)


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[start:start + size] for start in range(0, len(data), size)]


async def test_a_chunked_body_is_read_and_answered_as_the_body_says(api_token):
    body = json.dumps({"agent": "reimbursement", "messages": [USER_MESSAGE], "run_id": "chunked"}).encode()
    status, answer = await post_chunked("/api/runs/", pieces(body, 16), token=api_token)
    assert (status, answer["run_id"]) == (201, "chunked")
    assert await Run.objects.filter(run_id="chunked").aexists()


async def test_a_chunked_body_with_a_field_error_gets_that_field_error(api_token):
    body = json.dumps({"agent": "reimbursement", "messages": [USER_MESSAGE], "run_id": "bad id"}).encode()
    status, answer = await post_chunked("/api/runs/", pieces(body, 16), token=api_token)
    assert status == 400
    assert "run_id" in answer and "agent" not in answer


async def test_a_chunked_body_over_one_mebibyte_answers_413(api_token):
    body = json.dumps({"agent": "reimbursement", "messages": [{"role": "user", "content": "x" * 90_000}] * 12})
    status, answer = await post_chunked("/api/runs/", pieces(body.encode(), 64 * 1024), token=api_token)
    assert status == 413
    assert "larger than" in answer["detail"]
    assert not await Run.objects.aexists()
