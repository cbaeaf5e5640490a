"""Anthropic Messages API through the official SDK (``AsyncAnthropic``), streamed.

The SDK's retries are off (``max_retries=0``): :mod:`chatplatform.core.llm.retry` is the policy in
force. Every call carries an explicit ``anthropic.Timeout`` (the SDK uses ``httpx2``, which
rejects ``httpx.Timeout`` objects). Errors leave as :class:`ProviderError` subclasses.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic

from chatplatform.core.tokens.base import TokenCounter

from ._streaming import with_idle_timeout
from .anthropic_payload import build_params
from .base import (
    ChatRequest,
    Compaction,
    CompactionPart,
    ContextEdited,
    Done,
    Provider,
    StreamEvent,
    TextDelta,
    ToolCall,
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

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT = 5.0  # seconds; a provider that cannot accept a connection in 5 s is down


class AnthropicProvider(Provider):
    """Streams replies from Anthropic (or any server speaking its protocol at ``base_url``).

    ``timeout`` (seconds per HTTP request) and ``idle_timeout`` (seconds between two stream
    events) apply when a request does not set its own; ``retry_policy``, ``sleep`` and ``rng``
    (the jitter source) control retries (inject ``sleep`` in tests).
    """

    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 60.0,
        idle_timeout: float = 30.0,
        retry_policy: RetryPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: Callable[[], float] | None = None,
        client: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        self.timeout = timeout
        self.idle_timeout = idle_timeout
        self.retry_policy = retry_policy or RetryPolicy()
        self._sleep = sleep
        self._rng = rng
        self._client = client or anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=anthropic.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout)),
            # A redirect could carry the key and the prompt to a host nobody checked.
            http_client=anthropic.DefaultAsyncHttpxClient(follow_redirects=False),
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
        state = _StreamState()
        timeout = request.timeout or self.timeout
        idle_timeout = request.idle_timeout or self.idle_timeout
        raw = None
        try:
            params = build_params(request)
            # The provider's own context management is a beta: its own endpoint in the SDK.
            messages: Any = (
                self._client.beta.messages if "betas" in params else self._client.messages
            )
            raw = await messages.create(
                **params,
                stream=True,
                timeout=anthropic.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout)),
            )
            async for event in with_idle_timeout(raw, idle_timeout):
                for out in state.handle(event):
                    yield out
        except TimeoutError:
            raise StreamStalled(
                f"no stream event for {idle_timeout}s",
                idle_seconds=idle_timeout,
                partial_text=state.text,
            ) from None
        except anthropic.APIError as exc:
            raise map_error(exc, state.text) from exc
        finally:
            # Also when the consumer stops early: release the connection now, not at GC time.
            if raw is not None:
                await raw.close()
        if not state.finished:
            # The connection closed without message_stop: never report that as a success.
            raise state.failure("stream ended before message_stop")
        if state.compaction is not None:
            yield Compaction(state.compaction, state.compaction_usage())
        if state.applied_edits:
            yield ContextEdited(tuple(state.applied_edits))
        usage = state.usage()
        yield usage
        yield Done(state.stop_reason or "end_turn", usage)


class _StreamState:
    """Folds raw Messages API stream events into our events."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.tool: dict[str, Any] | None = None
        self.tool_json: list[str] = []
        self.counts: dict[str, int] = {}
        self.stop_reason: str | None = None
        self.finished = False
        #: A compaction block being received (its content and encrypted content arrive as
        #: ``compaction_delta``), then the finished block.
        self.compacting: dict[str, Any] | None = None
        self.compaction: CompactionPart | None = None
        self.compaction_counts: dict[str, int] = {}
        self.applied_edits: list[dict[str, Any]] = []

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def handle(self, event: Any) -> list[StreamEvent]:
        kind = event.type
        if kind == "message_start":
            self._record_usage(event.message.usage)
            # The prompt is billed from here on: reported now, so that a reply stopped
            # before the end still records what its prompt cost.
            return [self.usage()]
        elif kind == "content_block_start" and event.content_block.type == "compaction":
            block = event.content_block
            self.compacting = {
                "content": block.content or "",
                "encrypted_content": block.encrypted_content,
                "signature": getattr(block, "signature", None),
            }
        elif kind == "content_block_delta" and self.compacting is not None:
            self._compaction_delta(event.delta)
        elif kind == "content_block_stop" and self.compacting is not None:
            found = self.compacting
            self.compaction = CompactionPart(
                found["content"] or None, found["encrypted_content"], found["signature"]
            )
            self.compacting = None
        elif kind == "content_block_start" and event.content_block.type == "tool_use":
            block = event.content_block
            self.tool, self.tool_json = {"id": block.id, "name": block.name}, []
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta" and delta.text:
                self.parts.append(delta.text)
                return [TextDelta(delta.text)]
            if delta.type == "input_json_delta":
                self.tool_json.append(delta.partial_json)
        elif kind == "content_block_stop" and self.tool is not None:
            raw_input = "".join(self.tool_json).strip()
            try:
                tool_input = json.loads(raw_input or "{}")
            except json.JSONDecodeError:
                raise self.failure(f"malformed input for tool {self.tool['name']}") from None
            call = ToolCall(self.tool["id"], self.tool["name"], tool_input)
            self.tool = None
            return [call]
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self._record_usage(event.usage)
            management = getattr(event, "context_management", None)
            if management is not None:
                self.applied_edits = [e.model_dump() for e in management.applied_edits]
        elif kind == "message_stop":
            self.finished = True
        return []

    def failure(self, message: str) -> ProviderError:
        """The error for a broken stream: interrupted once text went out, else retryable."""
        if self.text:
            return StreamInterrupted(message, cause="malformed_stream", partial_text=self.text)
        return ProviderUnavailable(message)

    def _compaction_delta(self, delta: Any) -> None:
        assert self.compacting is not None  # deltas follow their block's start
        if delta.type == "signature_delta":
            self.compacting["signature"] = delta.signature
            return
        if delta.type != "compaction_delta":
            return
        if delta.content:
            self.compacting["content"] += delta.content
        if delta.encrypted_content is not None:
            self.compacting["encrypted_content"] = delta.encrypted_content

    def _record_usage(self, usage: Any) -> None:
        for item in getattr(usage, "iterations", None) or ():
            # The compaction's own sampling: billed apart, not in the top-level fields.
            if item.type == "compaction":
                self.compaction_counts = {
                    "input_tokens": item.input_tokens,
                    "output_tokens": item.output_tokens,
                    "cache_read_input_tokens": item.cache_read_input_tokens,
                    "cache_creation_input_tokens": item.cache_creation_input_tokens,
                }
        # message_delta usage is cumulative; fields it leaves out keep message_start's value.
        for field in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ):
            value = getattr(usage, field, None)
            if value is not None:
                self.counts[field] = value

    def usage(self) -> Usage:
        return _usage(self.counts)

    def compaction_usage(self) -> Usage:
        return _usage(self.compaction_counts)


def build_client(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 60.0,
    counter: TokenCounter | None = None,
    prompt_cache: PromptCache | None = None,
    **options: Any,
) -> AnthropicProvider:
    """An :class:`AnthropicProvider`, the client factory of its registry entry
    (:mod:`.providers`); ``counter`` and ``prompt_cache`` are the offline provider's."""
    if not api_key:
        raise ValueError("the anthropic provider needs an api_key")
    return AnthropicProvider(api_key=api_key, base_url=base_url, timeout=timeout, **options)


def _usage(counts: dict[str, int]) -> Usage:
    return Usage(
        input_tokens=counts.get("input_tokens", 0),
        output_tokens=counts.get("output_tokens", 0),
        cache_read_tokens=counts.get("cache_read_input_tokens", 0),
        cache_write_tokens=counts.get("cache_creation_input_tokens", 0),
    )


def map_error(exc: anthropic.APIError, partial_text: str = "") -> ProviderError:
    """Translate an SDK error (HTTP status, stream ``error`` event, timeout) to ours."""
    if isinstance(exc, anthropic.APITimeoutError):
        error: ProviderError = ProviderTimedOut(str(exc))
    elif isinstance(exc, anthropic.APIConnectionError):
        error = ProviderUnreachable(str(exc))
    elif isinstance(exc, anthropic.APIStatusError):
        # An `error` event inside a 200 stream carries its type only in the body.
        status = exc.status_code if exc.status_code >= 400 else None
        return classify_error(
            status=status,
            error_type=exc.type,
            message=exc.api_message or exc.message,
            headers=exc.response.headers,
            error_code=exc.error_code,
            partial_text=partial_text,
        )
    else:
        error = ProviderUnavailable(str(exc))
    if partial_text:
        return StreamInterrupted(
            f"reply interrupted: {error.message}", cause=error.code, partial_text=partial_text
        )
    return error
