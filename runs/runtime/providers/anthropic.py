"""AnthropicModel: the Anthropic Messages API, streamed, as a runtime model.

The runtime's history maps onto Messages like this: the system prompt and any ``system`` messages become
``system=``; ``tool`` messages become ``user`` turns of ``tool_result`` blocks; consecutive turns of one role
are merged, since the API wants user and assistant turns to alternate.

Prompt caching (on by default): ``cache_control`` breakpoints go on the system prompt, the last tool, the last
block of the turn the previous request ended with (the stable prefix, which that request wrote to the
cache, so this one reads it, also when it is a resumed leg in another process) and the last block of the
final turn (written for the next request). The history is byte-stable across legs, which is what makes
those prefixes match.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from ..model import ModelRequest
from .base import SdkModel, _base64, _plain_text, parse_tool_input, tool_result_text

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicModel", "create_anthropic", "messages_params"]

#: The output limit when none is configured (the API requires one).
DEFAULT_MAX_TOKENS = 8192

EPHEMERAL = {"type": "ephemeral"}

# Anthropic's stop_reason -> the runtime's step finish reason.
_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content-filter",
    "pause_turn": "other",
}


class AnthropicModel(SdkModel):
    """A Claude model behind ``client.messages.create(..., stream=True)``.

    Takes the options of ``SdkModel`` (``api_key`` defaults to ``ANTHROPIC_API_KEY``, ``base_url`` to
    ``ANTHROPIC_BASE_URL``, ``max_tokens`` to ``DEFAULT_MAX_TOKENS``), plus ``prompt_caching`` (default on).
    """

    api_key_env = "ANTHROPIC_API_KEY"
    base_url_env = "ANTHROPIC_BASE_URL"
    default_max_tokens = DEFAULT_MAX_TOKENS

    def __init__(self, model_id: str, *, prompt_caching: bool = True, **options: Any) -> None:
        super().__init__(model_id, **options)
        self.prompt_caching = bool(prompt_caching)

    def _build_client(self, **kwargs: Any) -> Any:
        import anthropic

        return anthropic.AsyncAnthropic(**kwargs)

    def _omit(self) -> Any:
        import anthropic

        return anthropic.Omit()

    def _resolved_key(self) -> str | None:
        return super()._resolved_key() or os.environ.get("ANTHROPIC_AUTH_TOKEN") or None

    def _sdk_errors(self) -> type[BaseException]:
        import anthropic

        return anthropic.AnthropicError

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params = messages_params(request, prompt_caching=self.prompt_caching)
        params["max_tokens"] = self.max_tokens
        if self.tool_choice is not None and params.get("tools"):
            params["tool_choice"] = _tool_choice(self.tool_choice)
        return params

    def _request_options(self) -> dict[str, Any]:
        options = super()._request_options()
        if self.temperature is not None:
            # In the body itself: recent SDKs dropped the keyword, and the API still takes it for most models.
            options["extra_body"] = {"temperature": self.temperature, **options.get("extra_body", {})}
        return options

    async def _events(self, client: Any, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        import anthropic
        import httpx2

        usage = _Usage()
        tool_blocks: dict[int, dict[str, Any]] = {}  # content block index -> the tool_use block being streamed
        # Tool calls whose input did not parse when their block closed: only the stop reason, which comes
        # after, tells a cut-off input from a malformed one. Later calls wait behind them to keep the order.
        held: list[dict[str, Any]] = []
        stop_reason: str | None = None
        ended = False
        stream = await client.messages.create(model=self.model_id, stream=True, **params, **self._request_options())
        try:
            async with stream:
                async for event in stream:
                    kind = event.type
                    if kind == "message_start":
                        usage.update(event.message.usage)
                        yield {"type": "usage", "usage": usage.as_dict()}
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
                            call = self._tool_call(block, cut_off=False)
                            if held or "input_error" in call:
                                held.append(block)
                            else:
                                yield call
                    elif kind == "message_delta":
                        stop_reason = getattr(event.delta, "stop_reason", None) or stop_reason
                        usage.update(event.usage)
                        yield {"type": "usage", "usage": usage.as_dict()}
                    elif kind == "message_stop":
                        ended = True
        except httpx2.TimeoutException as exc:
            raise anthropic.APITimeoutError(request=stream.response.request) from exc
        except httpx2.TransportError as exc:
            # The SDK lets a broken response body through as the transport's error; say what it is.
            raise _stream_cut(anthropic, stream, f"The response stream was cut ({type(exc).__name__}).") from exc
        if not ended:
            raise _stream_cut(anthropic, stream, "The response stream ended before message_stop.")
        cut_off = _STOP_REASONS.get(stop_reason or "") == "length"
        for block in [*held, *tool_blocks.values()]:
            yield self._tool_call(block, cut_off=cut_off)
        yield {"type": "finish", "usage": usage.as_dict(), "finish_reason": _STOP_REASONS.get(stop_reason or "")}

    def _tool_call(self, block: Mapping[str, Any], *, cut_off: bool) -> dict[str, Any]:
        tool_input, error = parse_tool_input(
            "".join(block["json"]), fallback=block["input"], cut_off=cut_off, max_tokens=self.max_tokens
        )
        call = {"type": "tool-call", "tool_call_id": block["id"], "tool_name": block["name"], "input": tool_input}
        if error is not None:
            call["input_error"] = error
        return call


def create_anthropic(api_key: str | None = None, **options: Any) -> Callable[[str], AnthropicModel]:
    """A provider: ``create_anthropic(api_key=...)("claude-...")`` is an AnthropicModel with those options."""

    def factory(model_id: str) -> AnthropicModel:
        return AnthropicModel(model_id, api_key=api_key, **options)

    return factory


class _Usage:
    """Anthropic's usage as the runtime counts it: ``input_tokens`` there excludes cached tokens, here not."""

    def __init__(self) -> None:
        self.input = self.output = self.cache_read = self.cache_write = 0

    def update(self, raw: Any) -> None:
        # message_start carries the input side; message_delta's usage is cumulative, its input fields optional.
        self.input = getattr(raw, "input_tokens", None) or self.input
        self.output = getattr(raw, "output_tokens", None) or self.output
        self.cache_read = getattr(raw, "cache_read_input_tokens", None) or self.cache_read
        self.cache_write = getattr(raw, "cache_creation_input_tokens", None) or self.cache_write

    def as_dict(self) -> dict[str, int]:
        usage = {"input_tokens": self.input + self.cache_read + self.cache_write, "output_tokens": self.output}
        if self.cache_read:
            usage["cache_read_tokens"] = self.cache_read
        if self.cache_write:
            usage["cache_write_tokens"] = self.cache_write
        return usage


def _stream_cut(anthropic: Any, stream: Any, message: str) -> BaseException:
    error = anthropic.APIConnectionError(message=message, request=stream.response.request)
    error.is_stream_cut = True  # read by classify_model_error: transient, reason "stream-cut"
    return error


def _tool_choice(choice: str | Mapping[str, Any]) -> dict[str, Any]:
    if choice == "auto":
        return {"type": "auto"}
    if choice == "required":
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    if "tool_name" in choice:  # type: ignore[operator]
        return {"type": "tool", "name": choice["tool_name"]}  # type: ignore[index]
    return dict(choice)  # type: ignore[arg-type]


# ------------------------------------------------------------------ the request


def messages_params(request: ModelRequest, *, prompt_caching: bool = False) -> dict[str, Any]:
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
    if prompt_caching:
        _mark_cache_breakpoints(params)
    return params


def _mark_cache_breakpoints(params: dict[str, Any]) -> None:
    """At most four ``cache_control`` breakpoints (the API's limit): system, tools, stable prefix, final turn."""
    if params.get("system"):
        params["system"] = [{"type": "text", "text": params["system"], "cache_control": EPHEMERAL}]
    if params.get("tools"):
        params["tools"][-1]["cache_control"] = EPHEMERAL
    turns = params["messages"]
    if not turns:
        return
    marked = [len(turns) - 1]
    # The previous request ended with the turn before the last assistant turn (the model's answer to it).
    answers = [index for index, turn in enumerate(turns) if turn["role"] == "assistant"]
    if answers and answers[-1] > 0 and answers[-1] - 1 != marked[0]:
        marked.append(answers[-1] - 1)
    for index in marked:
        turns[index]["content"][-1]["cache_control"] = EPHEMERAL


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
            output = tool_result_text(part)
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
