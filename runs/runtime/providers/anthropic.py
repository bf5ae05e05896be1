"""AnthropicModel: the Anthropic Messages API, streamed, as a runtime model.

The runtime's history maps onto Messages like this: the system prompt and any ``system`` messages become
``system=``; ``tool`` messages become ``user`` turns of ``tool_result`` blocks; consecutive turns of one role
are merged, since the API wants user and assistant turns to alternate.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from ..model import ModelRequest
from .base import SdkModel, _base64, _output_text, _plain_text

__all__ = ["AnthropicModel", "create_anthropic"]


class AnthropicModel(SdkModel):
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
        super().__init__(model_id, client=client, api_key=api_key, base_url=base_url, pricing=pricing)
        self.max_tokens = max_tokens

    def _build_client(self, *, api_key: str | None, base_url: str | None) -> Any:
        import anthropic

        return anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url)

    def _sdk_errors(self) -> type[BaseException]:
        import anthropic

        return anthropic.AnthropicError

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        return messages_params(request)

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


