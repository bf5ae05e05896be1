"""A real HTTP server on 127.0.0.1 that plays back recorded API answers and keeps every request it got.

The SDKs talk to it over a socket as they would to the real API: streamed answers go out one Server-Sent
Event at a time in chunked transfer encoding, so a test can also cut a stream mid-body (the socket closes
before the last chunk), end it early but cleanly, or hold it open until the test lets go.
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["HangReply", "JSONReply", "LocalAPI", "Recorded", "SSEReply"]


@dataclass
class SSEReply:
    """A 200 event stream. ``cut_after=n`` drops the connection after n events (no closing chunk);
    ``end_after=n`` ends the body cleanly after n events; ``hold_after=n`` stops after n events until
    ``LocalAPI.release()``."""

    recording: str
    cut_after: int | None = None
    end_after: int | None = None
    hold_after: int | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def events(self) -> list[str]:
        return [event + "\n\n" for event in self.recording.split("\n\n") if event.strip()]


@dataclass
class JSONReply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class HangReply:
    """Never answers (until the server stops): for client timeouts."""


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # the decoded JSON body


class LocalAPI:
    """Answers request n with reply n; ``base_url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self, *replies: str | SSEReply | JSONReply | HangReply) -> None:
        self.replies = [SSEReply(reply) if isinstance(reply, str) else reply for reply in replies]
        self.requests: list[Recorded] = []
        self.released = threading.Event()
        self.stopped = threading.Event()
        self.reached_hold = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # A short poll interval: shutdown() waits for the serving loop to notice.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def bodies(self) -> list[Any]:
        return [request.body for request in self.requests]

    def start(self) -> LocalAPI:
        self._thread.start()
        return self

    def release(self) -> None:
        self.released.set()

    def stop(self) -> None:
        self.stopped.set()
        self.released.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LocalAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self, recorded: Recorded) -> SSEReply | JSONReply | HangReply:
        with self._lock:
            self.requests.append(recorded)
            if not self.replies:
                return JSONReply(500, {"error": {"type": "test_error", "message": f"no reply left for request {len(self.requests)}"}})
            return self.replies.pop(0)


def _handler_for(api: LocalAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            return None

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            headers = {name.lower(): value for name, value in self.headers.items()}
            reply = api._next(Recorded("POST", self.path, headers, body))
            self.close_connection = True
            if isinstance(reply, HangReply):
                api.stopped.wait(30)
                return
            if isinstance(reply, JSONReply):
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("connection", "close")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
                return
            self._stream(reply)

        def _stream(self, reply: SSEReply) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("connection", "close")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            for sent, event in enumerate(reply.events):
                if sent == reply.cut_after:
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)  # mid-body: no closing chunk
                    return
                if sent == reply.end_after:
                    break
                if sent == reply.hold_after:
                    api.reached_hold.set()
                    api.released.wait(30)
                    if api.stopped.is_set():
                        return
                data = event.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler
