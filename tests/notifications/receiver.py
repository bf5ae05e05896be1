"""A webhook receiver for the tests: a real HTTP server on 127.0.0.1, in a thread, that keeps every delivery and
verifies it as a subscriber would, with ``standardwebhooks.Webhook(secret).verify``.

It answers each POST with the next of its ``answers`` (a status code, or ``"hang"`` to answer after
``hang_seconds``), then with 204 once they run out; ``stop()`` closes its port (a delivery then finds the
connection refused) and ``start()`` opens the same port again.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook

__all__ = ["Delivery", "WebhookReceiver"]


@dataclass(frozen=True)
class Delivery:
    """One request the receiver got: its headers (names lower-cased), raw body, and the status it answered."""

    path: str
    headers: dict[str, str]
    body: bytes
    status: int

    @property
    def webhook_id(self) -> str:
        return self.headers.get("webhook-id", "")

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    def verified(self, secret: str) -> Any:
        """The payload, once standardwebhooks verified the signature (it raises otherwise)."""
        return Webhook(secret).verify(self.body, self.headers)


class WebhookReceiver:
    def __init__(self, *answers: int | str, hang_seconds: float = 1.0) -> None:
        self.answers = list(answers)
        self.hang_seconds = hang_seconds
        self.deliveries: list[Delivery] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/deuz"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._lock:
                    answer = receiver.answers.pop(0) if receiver.answers else 204
                if answer == "hang":
                    time.sleep(receiver.hang_seconds)
                    answer = 204
                headers = {name.lower(): value for name, value in self.headers.items()}
                with receiver._lock:
                    receiver.deliveries.append(Delivery(self.path, headers, body, int(answer)))
                self.send_response(int(answer))
                if 300 <= int(answer) < 400:
                    self.send_header("Location", receiver.redirect_to)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="webhook-receiver", daemon=True).start()

    redirect_to = "http://127.0.0.1:9/"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def types(self) -> list[str]:
        return [delivery.json["type"] for delivery in self.deliveries]

    def of_type(self, event_type: str) -> list[Delivery]:
        return [delivery for delivery in self.deliveries if delivery.json["type"] == event_type]
