"""What both SDK-backed models share: a client per event loop, key-scrubbed errors, small converters."""

from __future__ import annotations

import asyncio
import base64
import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from ..model import ModelRequest
from ..redact import redact

__all__ = ["SdkModel"]


class SdkModel(ABC):
    """A model behind an official async SDK client. Subclasses say how to build the client, which errors the
    SDK raises, how a request becomes the SDK's parameters, and how the SDK's stream becomes model events."""

    def __init__(
        self,
        model_id: str,
        *,
        client: Any = None,
        api_key: str | None = None,
        base_url: str | None = None,
        pricing: Mapping[str, float] | None = None,
    ) -> None:
        if client is not None and (api_key is not None or base_url is not None):
            raise TypeError("Pass either client or api_key/base_url, not both: configure the client you pass.")
        self.model_id = model_id
        self.pricing = dict(pricing) if pricing else None
        self._client = client
        self._api_key = api_key
        self._base_url = base_url
        self._own_client: tuple[asyncio.AbstractEventLoop | None, Any] | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_id!r})"

    @property
    def client(self) -> Any:
        """The SDK client: the one given, else one built for the running event loop.

        A client's pooled connections belong to the loop that opened them, so a model that outlives its loop
        (``async_to_sync`` runs a fresh loop per call) builds a new client rather than reuse dead connections.
        """
        if self._client is not None:
            return self._client
        loop = _running_loop()
        if self._own_client is None or self._own_client[0] is not loop:
            self._own_client = (loop, self._build_client(api_key=self._api_key, base_url=self._base_url))
        return self._own_client[1]

    async def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
        error_types = self._sdk_errors()
        params = self._params(request)
        client = None
        try:
            client = self.client
            async for event in self._events(client, params):
                yield event
        except error_types as exc:
            _scrub(exc, [self._api_key, getattr(client, "api_key", None)])
            raise

    # Subclasses implement these.

    @abstractmethod
    def _build_client(self, *, api_key: str | None, base_url: str | None) -> Any:
        ...

    @abstractmethod
    def _sdk_errors(self) -> type[BaseException] | tuple[type[BaseException], ...]:
        ...

    @abstractmethod
    def _params(self, request: ModelRequest) -> dict[str, Any]:
        ...

    @abstractmethod
    def _events(self, client: Any, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        ...


def _base64(data: bytes | bytearray | str) -> str:
    """Raw bytes as base64; a string is taken to be base64 already."""
    if isinstance(data, str):
        return data
    return base64.b64encode(bytes(data)).decode("ascii")


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return json.dumps(output, ensure_ascii=False, default=str)


def _plain_text(content: str | Iterable[Mapping[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


# ----------------------------------------------------------------- the response


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


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
