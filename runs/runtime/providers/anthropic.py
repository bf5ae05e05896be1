"""AnthropicModel: the Anthropic Messages API, streamed, as a runtime model.

The runtime's history maps onto Messages like this: the system prompt and any ``system`` messages become
``system=``; ``tool`` messages become ``user`` turns of ``tool_result`` blocks; consecutive turns of one role
are merged, since the API wants user and assistant turns to alternate.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from ..model import ModelRequest
from ..redact import redact

__all__ = ["AnthropicModel", "create_anthropic"]


class AnthropicModel:
    """A Claude model behind ``client.messages.create(..., stream=True)``.

    Pass ``client`` (an ``anthropic.AsyncAnthropic``) to configure retries, timeouts or transport yourself;
    otherwise the model builds one from ``api_key`` (default: ``ANTHROPIC_API_KEY``) and ``base_url``.
    """

    def __init__(
        self,
        model_id: str,
        *,
        client: Any = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        pricing: Mapping[str, float] | None = None,
        base_url: str | None = None,
    ) -> None:
        if client is not None and (api_key is not None or base_url is not None):
            raise TypeError("Pass either client or api_key/base_url, not both: configure the client you pass.")
        self.model_id = model_id
        self.max_tokens = max_tokens
        self.pricing = dict(pricing) if pricing else None
        self._client = client
        self._api_key = api_key
        self._base_url = base_url
        self._own_client: tuple[asyncio.AbstractEventLoop | None, Any] | None = None

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model_id!r})"

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
            import anthropic

            self._own_client = (loop, anthropic.AsyncAnthropic(api_key=self._api_key, base_url=self._base_url))
        return self._own_client[1]

    async def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
        import anthropic

        params = messages_params(request)
        client = None
        try:
            client = self.client
            async for event in self._events(client, params):
                yield event
        except anthropic.AnthropicError as exc:
            _scrub(exc, [self._api_key, getattr(client, "api_key", None)])
            raise

    async def _events(self, client: Any, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        input_tokens = output_tokens = 0
        tool_blocks: dict[int, dict[str, Any]] = {}  # content block index -> the tool_use block being streamed
        stream = await client.messages.create(model=self.model_id, max_tokens=self.max_tokens, stream=True, **params)
        async with stream:
            async for event in stream:
                kind = event.type
                if kind == "message_start":
                    input_tokens = event.message.usage.input_tokens or 0
                    output_tokens = event.message.usage.output_tokens or 0
                elif kind == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        tool_blocks[event.index] = {"id": block.id, "name": block.name, "input": block.input, "json": []}
                elif kind == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta" and delta.text:
                        yield {"type": "text-delta", "text": delta.text}
                    elif delta.type == "input_json_delta" and event.index in tool_blocks:
                        tool_blocks[event.index]["json"].append(getattr(delta, "partial_json", None) or "")
                elif kind == "content_block_stop":
                    block = tool_blocks.pop(event.index, None)
                    if block is not None:
                        yield _tool_call(block)
                elif kind == "message_delta":
                    # message_delta usage is cumulative; input_tokens there is optional.
                    output_tokens = event.usage.output_tokens or output_tokens
                    input_tokens = getattr(event.usage, "input_tokens", None) or input_tokens
        yield {"type": "finish", "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def create_anthropic(api_key: str | None = None, **options: Any) -> Callable[[str], AnthropicModel]:
    """A provider: ``create_anthropic(api_key=...)("claude-...")`` is an AnthropicModel with those options."""

    def factory(model_id: str) -> AnthropicModel:
        return AnthropicModel(model_id, api_key=api_key, **options)

    return factory


# ------------------------------------------------------------------ the request


def messages_params(request: ModelRequest) -> dict[str, Any]:
    """The ``messages``, ``system`` and ``tools`` arguments of ``messages.create`` for a runtime request."""
    system = [request["system"]] if request.get("system") else []
    turns: list[dict[str, Any]] = []
    for message in request.get("messages") or []:
        role = message["role"]
        if role == "system":
            text = _plain_text(message["content"])
            if text:
                system.append(text)
            continue
        blocks = _blocks(message["content"])
        if not blocks:  # an empty assistant reply, say: the API rejects empty content
            continue
        wire_role = "assistant" if role == "assistant" else "user"
        if turns and turns[-1]["role"] == wire_role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": wire_role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            # The API wants a turn's tool results before any other block of it.
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    params: dict[str, Any] = {"messages": turns}
    if system:
        params["system"] = "\n\n".join(system)
    tools = [_tool(spec) for spec in request.get("tools") or []]
    if tools:
        params["tools"] = tools
    return params


def _tool(spec: Mapping[str, Any]) -> dict[str, Any]:
    tool = {"name": spec["name"], "input_schema": spec.get("input_schema") or {"type": "object", "properties": {}}}
    if spec.get("description"):
        tool["description"] = spec["description"]
    return tool


def _blocks(content: str | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks = []
    for part in content:
        kind = part["type"]
        if kind == "text":
            if part["text"]:  # the API rejects empty text blocks
                blocks.append({"type": "text", "text": part["text"]})
        elif kind in ("image", "file"):
            blocks.append(_media_block(part))
        elif kind == "tool_call":
            blocks.append({"type": "tool_use", "id": part["tool_call_id"], "name": part["tool_name"], "input": part["input"]})
        elif kind == "tool_result":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part["tool_call_id"]}
            output = _output_text(part.get("output"))
            if output:
                block["content"] = output
            block["is_error"] = bool(part.get("is_error"))
            blocks.append(block)
        else:
            raise ValueError(f"AnthropicModel cannot send a {kind!r} part.")
    return blocks


def _media_block(part: Mapping[str, Any]) -> dict[str, Any]:
    media_type = part["media_type"]
    if media_type.startswith("image/"):
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": _base64(part["data"])}}
    if media_type == "application/pdf":
        return {"type": "document", "source": {"type": "base64", "media_type": media_type, "data": _base64(part["data"])}}
    if media_type.startswith("text/"):
        data = part["data"]
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else str(data)
        return {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}}
    raise ValueError(f"AnthropicModel cannot send a {media_type!r} file; it takes images, PDFs and text.")


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


def _tool_call(block: Mapping[str, Any]) -> dict[str, Any]:
    raw = "".join(block["json"])
    if raw.strip():
        try:
            tool_input = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"Anthropic streamed invalid JSON input for tool {block['name']!r}: {raw[:200]!r}") from exc
    else:
        tool_input = block["input"] or {}
    if not isinstance(tool_input, dict):
        raise ValueError(f"Anthropic streamed a non-object input for tool {block['name']!r}: {raw[:200]!r}")
    return {"type": "tool-call", "tool_call_id": block["id"], "tool_name": block["name"], "input": tool_input}


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
