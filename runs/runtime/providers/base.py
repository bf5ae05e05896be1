"""What both SDK-backed models share: options, one pooled client per event loop, key-scrubbed errors, converters."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import weakref
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ..exceptions import ModelCallError
from ..model import ModelRequest
from ..redact import redact
from .pricing import price_for

__all__ = ["SdkModel", "aclose_clients", "is_local_base_url", "tool_result_text"]

_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})

# Pooled SDK clients: event loop -> {client configuration -> client}. A client's connections belong to the loop
# that opened them, so each loop has its own; a loop that is garbage collected takes its clients with it.
_POOL: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], Any]] = weakref.WeakKeyDictionary()
_NO_LOOP: dict[tuple[Any, ...], Any] = {}  # clients built outside any loop (read in sync code)


def is_local_base_url(url: str | None) -> bool:
    """Whether ``url`` names a server that needs no API key: plain ``http://``, or localhost / 127.0.0.1."""
    if not url:
        return False
    parts = urlsplit(str(url))
    return parts.scheme == "http" or (parts.hostname or "").lower() in _LOCAL_HOSTS


async def aclose_clients() -> int:
    """Close every pooled SDK client of the running event loop (a worker calls this at shutdown); returns
    how many were closed. A model used afterwards builds a fresh client."""
    clients = _POOL.pop(asyncio.get_running_loop(), {})
    for client in clients.values():
        await client.close()
    return len(clients)


class SdkModel(ABC):
    """A model behind an official async SDK client. Subclasses say how to build the client, which errors the
    SDK raises, how a request becomes the SDK's parameters, and how the SDK's stream becomes model events.

    Options (keyword-only): ``api_key`` (default: the provider's environment variable; none is needed for a
    local ``base_url``), ``base_url``, ``timeout`` (seconds per request), ``max_retries`` (the SDK's own
    quick retries), ``max_tokens`` (the output limit), ``temperature``, ``tool_choice`` (``"auto"``,
    ``"required"``, ``"none"``, ``{"tool_name": name}``, or the provider's own dict), ``extra_headers`` and
    ``extra_body`` (sent with every request), ``pricing`` (per token: ``input``, ``output``, ``cache_read``,
    ``cache_write``; default: the price table). ``client`` replaces the client-level options (key, base URL,
    timeout, retries) with an SDK client you configured yourself.
    """

    #: Set by subclasses: the environment variables the SDK reads for its key and base URL.
    api_key_env: ClassVar[str]
    base_url_env: ClassVar[str]
    default_max_tokens: ClassVar[int | None] = None

    def __init__(
        self,
        model_id: str,
        *,
        client: Any = None,
        api_key: str | None = None,
        base_url: str | None = None,
        pricing: Mapping[str, float] | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        client_options = {"api_key": api_key, "base_url": base_url, "timeout": timeout, "max_retries": max_retries}
        given = sorted(name for name, value in client_options.items() if value is not None)
        if client is not None and given:
            raise TypeError(
                f"Pass either client or {', '.join(given)}, not both: configure the client you pass."
            )
        if not isinstance(model_id, str) or not model_id:
            raise ValueError("model_id must be a non-empty string.")
        self.model_id = model_id
        self.pricing = dict(pricing) if pricing else price_for(model_id)
        self.timeout = _positive_number("timeout", timeout)
        self.max_retries = _whole_number("max_retries", max_retries, minimum=0)
        self.max_tokens = _whole_number("max_tokens", max_tokens, minimum=1) or self.default_max_tokens
        self.temperature = None if temperature is None else _number("temperature", temperature)
        self.tool_choice = _tool_choice(tool_choice)
        self.extra_headers = _string_mapping("extra_headers", extra_headers)
        self.extra_body = dict(extra_body) if extra_body else None
        if extra_body is not None and not isinstance(extra_body, Mapping):
            raise TypeError("extra_body must be a dict of JSON values.")
        self._client = client
        self._api_key = api_key
        self._base_url = base_url

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_id!r})"

    @property
    def base_url(self) -> str | None:
        """Where requests go: the client's, ``base_url``, else the SDK's environment variable (None: the default)."""
        if self._client is not None:
            return str(self._client.base_url)
        return self._base_url or os.environ.get(self.base_url_env) or None

    @property
    def is_keyless(self) -> bool:
        """True when no key is configured and the base URL is local, so requests go without credentials."""
        return self._client is None and not self._resolved_key() and is_local_base_url(self.base_url)

    @property
    def client(self) -> Any:
        """The SDK client: the one given, else the pooled one of the running event loop for this configuration.

        Models with the same configuration share a client, so a worker that builds a model per leg keeps one
        client (and its connection pool) per event loop; ``aclose_clients()`` closes them at shutdown.
        """
        if self._client is not None:
            return self._client
        key = self._pool_key()
        clients = _pool_of(_running_loop())
        if key not in clients:
            clients[key] = self._new_client()
        return clients[key]

    async def aclose(self) -> None:
        """Close the pooled client this model uses on the running loop; a client you passed stays yours to close."""
        if self._client is not None:
            return
        client = _pool_of(_running_loop()).pop(self._pool_key(), None)
        if client is not None:
            await client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
        error_types = self._sdk_errors()
        params = self._params(request)
        client = None
        try:
            client = self.client
            async for event in self._events(client, params):
                yield event
        except error_types as exc:
            # Extra header values may be credentials too (a gateway's token, say).
            _scrub(exc, [self._api_key, getattr(client, "api_key", None), *(self.extra_headers or {}).values()])
            raise

    # ------------------------------------------------------------ helpers

    def _request_options(self) -> dict[str, Any]:
        """The per-request SDK arguments every call carries: extra headers and body, and no credentials for a
        keyless local server (the SDKs refuse to send a request without one unless told it is omitted)."""
        options: dict[str, Any] = {}
        headers: dict[str, Any] = dict(self.extra_headers or {})
        if self.is_keyless:
            headers.setdefault("Authorization", self._omit())
        if headers:
            options["extra_headers"] = headers
        if self.extra_body:
            options["extra_body"] = dict(self.extra_body)
        return options

    def _client_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"api_key": self._api_key, "base_url": self._base_url}
        if self.timeout is not None:
            kwargs["timeout"] = self.timeout
        if self.max_retries is not None:
            kwargs["max_retries"] = self.max_retries
        return kwargs

    def _new_client(self) -> Any:
        if not self._resolved_key() and not is_local_base_url(self.base_url):
            raise ModelCallError(
                f"No API key: pass api_key= or set {self.api_key_env} (a local base URL, http:// or "
                "localhost, needs none).",
                error_name="MissingAPIKey",
                is_transient=False,
                reason="auth",
            )
        return self._build_client(**self._client_kwargs())

    def _resolved_key(self) -> str | None:
        return self._api_key or os.environ.get(self.api_key_env) or None

    def _pool_key(self) -> tuple[Any, ...]:
        return (type(self).__name__, self._api_key, self._base_url, self.timeout, self.max_retries)

    # Subclasses implement these.

    @abstractmethod
    def _build_client(self, **kwargs: Any) -> Any:
        ...

    @abstractmethod
    def _omit(self) -> Any:
        """The SDK's marker for a header left out."""

    @abstractmethod
    def _sdk_errors(self) -> type[BaseException] | tuple[type[BaseException], ...]:
        ...

    @abstractmethod
    def _params(self, request: ModelRequest) -> dict[str, Any]:
        ...

    @abstractmethod
    def _events(self, client: Any, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        ...


# ----------------------------------------------------------------- validation


def _positive_number(name: str, value: Any) -> float | None:
    if value is None:
        return None
    number = _number(name, value)
    if number <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}.")
    return number


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r}.")
    return float(value)


def _whole_number(name: str, value: Any, *, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}.")
    return value


def _string_mapping(name: str, value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TypeError(f"{name} must be a dict of strings to strings.")
    return dict(value) or None


def _tool_choice(value: Any) -> str | dict[str, Any] | None:
    """``auto`` / ``required`` / ``none`` / ``{"tool_name": name}``, or a provider's own dict passed as is."""
    if value is None or value in ("auto", "required", "none"):
        return value
    if isinstance(value, Mapping) and (
        (set(value) == {"tool_name"} and isinstance(value["tool_name"], str) and value["tool_name"]) or "type" in value
    ):
        return dict(value)
    raise ValueError(f"tool_choice must be 'auto', 'required', 'none' or {{'tool_name': name}}, got {value!r}.")


# ----------------------------------------------------------------- converters


def _base64(data: bytes | bytearray | str) -> str:
    """Raw bytes as base64; a string is taken to be base64 already."""
    if isinstance(data, str):
        return data
    return base64.b64encode(bytes(data)).decode("ascii")


def _output_text(output: Any) -> str:
    """A tool's output as the model reads it. Keys sorted: a resumed leg reloads the history from a store that
    keeps keys sorted, and the request must be byte-identical to the first leg's for the prompt cache to hit."""
    if isinstance(output, str):
        return output
    return json.dumps(output, ensure_ascii=False, sort_keys=True, default=str)


def tool_result_text(part: Mapping[str, Any]) -> str:
    """A tool result as the model reads it: its output, after a note of the input it actually ran with when a
    person edited the call before approving it (the model's own call keeps the input it asked for)."""
    output = _output_text(part.get("output"))
    edit = part.get("edit")
    if not isinstance(edit, Mapping):
        return output
    by = edit.get("by") or "a reviewer"
    note = (f"[{by} edited this call's input before approving it; the tool ran with "
            f"{json.dumps(edit.get('input'), ensure_ascii=False, sort_keys=True, default=str)}]")
    return f"{note}\n{output}" if output else note


def _plain_text(content: str | Iterable[Mapping[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def parse_tool_input(raw: str, *, fallback: Any = None, cut_off: bool, max_tokens: int | None) -> tuple[dict[str, Any], str | None]:
    """A tool call's streamed JSON as ``(input, input_error)``: the parsed object, or ``{}`` and the reason
    the model reads in the ``is_error`` result (cut off at the output limit, not JSON, not an object)."""
    if not raw.strip():
        if cut_off:
            return {}, _cut_off_message(max_tokens)
        return (dict(fallback) if isinstance(fallback, Mapping) else {}), None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        if cut_off:
            return {}, _cut_off_message(max_tokens)
        return {}, (
            f"The tool call's input is not valid JSON ({exc}); the tool was not run. Call it again with a "
            f"JSON object of its arguments. The input received was: {_excerpt(raw)}"
        )
    if not isinstance(value, dict):
        return {}, (
            f"The tool call's input is not a JSON object (got {type(value).__name__}); the tool was not run. "
            f"Call it again with an object of its arguments. The input received was: {_excerpt(raw)}"
        )
    return value, None


def _cut_off_message(max_tokens: int | None) -> str:
    limit = f" (max_tokens={max_tokens})" if max_tokens else ""
    return (
        f"The tool call's input was cut off at the output limit{limit}; the tool was not run. Call it again "
        "with a shorter input, or split the work into smaller calls."
    )


def _excerpt(raw: str, limit: int = 500) -> str:
    return repr(raw if len(raw) <= limit else raw[:limit] + "...")


# ----------------------------------------------------------------- the loop and errors


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _pool_of(loop: asyncio.AbstractEventLoop | None) -> dict[tuple[Any, ...], Any]:
    if loop is None:
        return _NO_LOOP
    clients = _POOL.get(loop)
    if clients is None:
        clients = _POOL[loop] = {}
    return clients


def _scrub(exc: BaseException, secrets: Iterable[Any]) -> None:
    """Strip the API key (and secret-looking values) from an SDK error, in place, before it travels on."""
    keys = [secret for secret in secrets if isinstance(secret, str) and secret]
    exc.args = tuple(redact(arg, keys) if isinstance(arg, str) else arg for arg in exc.args)
    if isinstance(getattr(exc, "message", None), str):
        exc.message = redact(exc.message, keys)  # type: ignore[attr-defined]
    if getattr(exc, "body", None) is not None:
        exc.body = _redact_json(exc.body, keys)  # type: ignore[attr-defined]


def _redact_json(value: Any, keys: list[str]) -> Any:
    if isinstance(value, str):
        return redact(value, keys)
    if isinstance(value, list):
        return [_redact_json(item, keys) for item in value]
    if isinstance(value, dict):
        return {key: _redact_json(item, keys) for key, item in value.items()}
    return value
