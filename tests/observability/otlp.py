"""A local OTLP/HTTP trace receiver for the tests: an http.server on 127.0.0.1 that decodes each POST to /v1/traces
with opentelemetry-proto, as a collector would, and keeps the spans and the raw bodies."""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

__all__ = ["ReceivedSpan", "TraceReceiver"]


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(item) for item in any_value.array_value.values)
    return getattr(any_value, kind) if kind else None


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    start_ns: int
    end_ns: int
    service: dict[str, Any] = field(default_factory=dict)


class TraceReceiver:
    """Collects what OTLP/HTTP exporters send to ``endpoint`` (the value of OTEL_EXPORTER_OTLP_ENDPOINT)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.receive(self.path, body)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> TraceReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def receive(self, path: str, body: bytes) -> None:
        assert path == "/v1/traces", path
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans = []
        for resource_spans in request.resource_spans:
            service = {item.key: _value(item.value) for item in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(ReceivedSpan(
                        name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        attributes={item.key: _value(item.value) for item in span.attributes},
                        events=[(event.name, {item.key: _value(item.value) for item in event.attributes})
                                for event in span.events],
                        status_code=span.status.code, status_message=span.status.message,
                        start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano, service=service,
                    ))
        with self._lock:
            self.bodies.append(body)
            self.spans.extend(spans)

    def named(self, prefix: str) -> list[ReceivedSpan]:
        with self._lock:
            return [span for span in self.spans if span.name.startswith(prefix)]

    def wait_for(self, predicate: Any, *, timeout: float = 30, what: str = "the spans") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self):
                return
            time.sleep(0.05)
        raise TimeoutError(f"Timed out waiting for {what}; received {[span.name for span in self.spans]}.")
