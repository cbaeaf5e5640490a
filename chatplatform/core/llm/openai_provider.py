"""Any OpenAI-compatible chat-completions server (Ollama, vLLM, llama.cpp, LM Studio, OpenAI)
through the official SDK (``AsyncOpenAI``), streamed with ``include_usage``.

Same contract as the Anthropic provider: SDK retries off (``max_retries=0``), our retry policy
in force, an explicit ``openai.Timeout`` per call, only :class:`ProviderError` leaves. These
servers cache prompt prefixes on their own (no markers), so the stable system part simply
goes first.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import openai

from chatplatform.core.tokens.base import TokenCounter

from ._streaming import with_idle_timeout
from .base import (
    ChatRequest,
    Done,
    ImagePart,
    Provider,
    RequestMessage,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolResultPart,
    ToolUsePart,
    Usage,
)
from .errors import (
    ProviderError,
    ProviderTimedOut,
    ProviderUnavailable,
    ProviderUnreachable,
    StreamInterrupted,
    StreamStalled,
    classify_error,
)
from .prompt_cache import PromptCache
from .retry import RetryPolicy, Sleep, stream_with_retry

CONNECT_TIMEOUT = 5.0  # seconds
# OpenAI finish_reason -> our (Anthropic-style) stop reasons, so the tool loop is neutral.
STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


class OpenAICompatibleProvider(Provider):
    """Streams chat completions from ``base_url`` (e.g. ``http://127.0.0.1:11434/v1``).

    ``api_key`` defaults to ``"not-needed"``: local servers ignore it but the SDK requires one.
    ``timeout`` (seconds per HTTP request) and ``idle_timeout`` (seconds between two stream
    chunks) apply when a request does not set its own.
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        idle_timeout: float = 30.0,
        retry_policy: RetryPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: Callable[[], float] | None = None,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        self.timeout = timeout
        self.idle_timeout = idle_timeout
        self.retry_policy = retry_policy or RetryPolicy()
        self._sleep = sleep
        self._rng = rng
        self._client = client or openai.AsyncOpenAI(
            api_key=api_key or "not-needed",
            base_url=base_url,
            max_retries=0,
            timeout=openai.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout)),
            # A redirect could carry the key and the prompt to a host nobody checked.
            http_client=openai.DefaultAsyncHttpxClient(follow_redirects=False),
        )

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Stream a reply; transient errors are retried before the first event only."""
        async for event in stream_with_retry(
            lambda: self._stream_once(request), self.retry_policy, sleep=self._sleep, rng=self._rng
        ):
            yield event

    async def aclose(self) -> None:
        await self._client.close()

    async def _stream_once(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        parts: list[str] = []
        tools: dict[int, dict[str, Any]] = {}
        finish_reason: str | None = None
        usage = Usage()
        timeout = request.timeout or self.timeout
        idle_timeout = request.idle_timeout or self.idle_timeout
        chunks = None
        try:
            chunks = await self._client.chat.completions.create(
                **build_params(request),
                stream=True,
                stream_options={"include_usage": True},
                timeout=openai.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout)),
            )
            async for chunk in with_idle_timeout(chunks, idle_timeout):
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices[:1]:
                    finish_reason = choice.finish_reason or finish_reason
                    delta = choice.delta
                    if delta.content:
                        parts.append(delta.content)
                        yield TextDelta(delta.content)
                    for call in delta.tool_calls or ():
                        slot = tools.setdefault(call.index, {"id": "", "name": "", "args": []})
                        slot["id"] = call.id or slot["id"]
                        if call.function is not None:
                            slot["name"] = call.function.name or slot["name"]
                            slot["args"].append(call.function.arguments or "")
        except TimeoutError:
            raise StreamStalled(
                f"no stream event for {idle_timeout}s",
                idle_seconds=idle_timeout,
                partial_text="".join(parts),
            ) from None
        except openai.APIError as exc:
            raise map_error(exc, "".join(parts)) from exc
        finally:
            # Also when the consumer stops early: release the connection now, not at GC time.
            if chunks is not None:
                await chunks.close()
        if finish_reason is None:
            message = "stream ended without a finish_reason"
            if parts:
                raise StreamInterrupted(
                    message, cause="connection_closed", partial_text="".join(parts)
                )
            raise ProviderUnavailable(message)
        for index in sorted(tools):
            yield _tool_call(tools[index], "".join(parts))
        yield usage
        # Some servers (vLLM, llama.cpp) say "stop" even after emitting tool calls.
        stop_reason = "tool_use" if tools else STOP_REASONS.get(finish_reason, finish_reason)
        yield Done(stop_reason, usage)


def build_client(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 60.0,
    counter: TokenCounter | None = None,
    prompt_cache: PromptCache | None = None,
    **options: Any,
) -> OpenAICompatibleProvider:
    """An :class:`OpenAICompatibleProvider`, the client factory of its registry entry
    (:mod:`.providers`); ``counter`` and ``prompt_cache`` are the offline provider's."""
    return OpenAICompatibleProvider(api_key=api_key, base_url=base_url, timeout=timeout, **options)


def _tool_call(slot: dict[str, Any], partial_text: str) -> ToolCall:
    raw = "".join(slot["args"]).strip()
    try:
        arguments = json.loads(raw or "{}")
    except json.JSONDecodeError:
        message = f"malformed arguments for tool {slot['name']}"
        if partial_text:
            raise StreamInterrupted(message, partial_text=partial_text) from None
        raise ProviderUnavailable(message) from None
    return ToolCall(slot["id"], slot["name"], arguments)


def _usage(raw: Any) -> Usage:
    details = getattr(raw, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", None) or 0) if details else 0
    # OpenAI's prompt_tokens include cached ones; ours exclude them (see Usage).
    return Usage(
        input_tokens=max(0, (raw.prompt_tokens or 0) - cached),
        output_tokens=raw.completion_tokens or 0,
        cache_read_tokens=cached,
    )


def build_params(request: ChatRequest) -> dict[str, Any]:
    """Keyword arguments for ``chat.completions.create`` (without stream settings/timeout)."""
    messages: list[dict[str, Any]] = []
    if system := "\n\n".join(request.system_blocks()):
        messages.append({"role": "system", "content": system})
    for message in request.messages:
        messages.extend(_messages(message))
    params: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        "max_tokens": request.max_tokens,
    }
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in request.tools
        ]
        params["tool_choice"] = (
            {"type": "function", "function": {"name": request.tool_name}}
            if request.tool_name
            else "required"
            if request.tool_choice == "any"
            else request.tool_choice
        )
    if request.temperature is not None:
        params["temperature"] = request.temperature
    return params


def _messages(message: RequestMessage) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"role": message.role, "content": message.content}]
    out: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    tool_calls: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            url = f"data:{part.media_type};base64,{part.data}"
            content.append({"type": "image_url", "image_url": {"url": url}})
        elif isinstance(part, ToolUsePart):
            function = {"name": part.name, "arguments": json.dumps(part.input)}
            tool_calls.append({"id": part.id, "type": "function", "function": function})
        elif isinstance(part, ToolResultPart):
            # Tool results are messages of their own in this protocol.
            out.append({"role": "tool", "tool_call_id": part.tool_use_id, "content": part.content})
    if message.role == "assistant":
        text = "".join(c["text"] for c in content if c["type"] == "text")
        entry: dict[str, Any] = {"role": "assistant", "content": text or None}
        if tool_calls:
            entry["tool_calls"] = tool_calls
        out.append(entry)
    elif content:
        out.append({"role": "user", "content": content})
    return out


def map_error(exc: openai.APIError, partial_text: str = "") -> ProviderError:
    """Translate an SDK error (HTTP status, ``{"error": ...}`` chunk, timeout) to ours."""
    if isinstance(exc, openai.APIConnectionError):
        timed_out = isinstance(exc, openai.APITimeoutError)
        error: ProviderError = (ProviderTimedOut if timed_out else ProviderUnreachable)(str(exc))
        if partial_text:
            return StreamInterrupted(str(exc), cause=error.code, partial_text=partial_text)
        return error
    body: dict[str, Any] = exc.body if isinstance(exc.body, dict) else {}
    # HTTP errors wrap the details in {"error": {...}}; a stream's error chunk is the details.
    nested = body.get("error")
    details: dict[str, Any] = nested if isinstance(nested, dict) else body
    status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
    headers = exc.response.headers if isinstance(exc, openai.APIStatusError) else None
    return classify_error(
        status=status,
        error_type=str(details.get("type") or "") or None,
        message=str(details.get("message") or exc.message),
        headers=headers,
        error_code=str(details.get("code") or ""),
        partial_text=partial_text,
    )
