"""A local server speaking Anthropic's Messages API, for driving the real ``anthropic`` SDK.

- ``POST /v1/messages``: JSON or SSE (``message_start``, ``content_block_start``,
  ``content_block_delta`` with ``text_delta`` / ``input_json_delta``, ``content_block_stop``,
  ``message_delta`` with usage and stop_reason, ``message_stop``; a ``ping`` too).
- Prompt caching: the prompt is read in the API's order (tools, system, messages); the prefix
  up to each ``cache_control`` breakpoint is remembered, so a later request with the same
  prefix reports ``cache_read_input_tokens`` and a new one ``cache_creation_input_tokens``.
- The API's own context management (server compaction, context editing, their beta
  headers): :mod:`.anthropic_context`.
- ``POST /v1/messages/count_tokens``: ``{"input_tokens": n}`` with a fixed framing per message.
- ``GET /v1/models`` and ``GET /v1/models/{id}``: the Models API over ``models``
  (``anthropic_models_fake``).
- ``tokenizer`` counts every prompt (a test may make it count more than the estimator); a
  prompt over its model's ``max_input_tokens`` (when ``models`` lists the model) is refused
  with the API's "prompt is too long" error.
- A request whose tool calls and results are not paired is refused as the API refuses it
  (``tool_pairing``).
- Errors on demand from the script; every request is recorded.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from chatplatform.core.llm.prompt_cache import PromptCache, Segment, anthropic_segments

from . import anthropic_models_fake as models_api
from .anthropic_context import (
    ContextOutcome,
    compaction_events,
    context_outcome,
    iterations,
    missing_beta,
)
from .behaviours import (
    Disconnect,
    ErrorAfter,
    HttpError,
    Reply,
    Stall,
    fake_token_count,
    prompt_too_long,
    split_words,
)
from .common import FakeServer, RecordedRequest, sse
from .tool_pairing import anthropic_pairing_error

COUNT_BASE_TOKENS = 4  # count_tokens: fixed cost of a request
COUNT_MESSAGE_TOKENS = 3  # count_tokens: framing of each message
_ids = itertools.count(1)


@dataclass(frozen=True)
class PromptUsage:
    input_tokens: int
    cache_read: int
    cache_write: int

    def as_dict(self, output_tokens: int) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_write,
            "cache_read_input_tokens": self.cache_read,
            "output_tokens": output_tokens,
        }


class FakeAnthropic(FakeServer):
    """``min_cacheable_tokens`` mirrors the API's minimum prefix length for caching."""

    def __init__(self, default_reply: Reply | None = None) -> None:
        super().__init__(default_reply)
        self.min_cacheable_tokens = 0
        self._cache = PromptCache()
        self._count_script: list[HttpError] = []
        #: What the context management made of each messages request, in order.
        self.outcomes: list[ContextOutcome] = []
        self.models: list[dict[str, Any]] = models_api.default_models()
        self.tokenizer: Callable[[str], int] = fake_token_count

    def reset(self) -> None:
        super().reset()
        self.outcomes = []
        self.min_cacheable_tokens = 0
        self._cache = PromptCache()
        self._count_script.clear()
        self.models = models_api.default_models()
        self.tokenizer = fake_token_count

    def script_count_tokens(self, *errors: HttpError) -> None:
        """Queue errors for the next count_tokens requests."""
        self._count_script.extend(errors)

    @property
    def message_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests_to("/v1/messages")]

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/v1/models/{model_id:path}", self._model, methods=["GET"]),
            ]
        )

    # --- handlers -------------------------------------------------------------------------

    async def _count_tokens(self, request: Request) -> Response:
        body = await self.record(request)
        if self._count_script:
            return error_response(self._count_script.pop(0))
        return JSONResponse({"input_tokens": self.prompt_tokens(body)})

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        """The request's prompt tokens as count_tokens reports them, by ``tokenizer``."""
        segments = anthropic_segments(body, self.tokenizer)
        messages = len(body.get("messages", []))
        return sum(s.tokens for s in segments) + COUNT_BASE_TOKENS + COUNT_MESSAGE_TOKENS * messages

    def window_error(self, body: dict[str, Any]) -> HttpError | None:
        """The API's error for a prompt longer than the model's window, else None."""
        window = models_api.window_of(self.models, str(body.get("model", "")))
        if window is None:
            return None
        tokens = self.prompt_tokens(body)
        return prompt_too_long(tokens, window) if tokens > window else None

    def record_get(self, request: Request) -> None:
        query = {key: request.query_params.getlist(key) for key in request.query_params}
        self.requests.append(RecordedRequest(request.url.path, dict(request.headers), query))

    async def _models(self, request: Request) -> Response:
        self.record_get(request)
        return models_api.list_response(self.models, request)

    async def _model(self, request: Request) -> Response:
        self.record_get(request)
        return models_api.retrieve_response(self.models, request.path_params["model_id"])

    async def _messages(self, request: Request) -> Response:
        body = await self.record(request)
        if (too_long := self.window_error(body)) is not None:
            return error_response(too_long)
        problem = missing_beta(body, self.requests[-1].headers)
        if problem:
            return error_response(HttpError(400, "invalid_request_error", problem))
        if (unpaired := anthropic_pairing_error(body)) is not None:
            return error_response(unpaired)
        behaviour = self.next_behaviour()
        if isinstance(behaviour, HttpError):
            return error_response(behaviour)
        outcome = context_outcome(body)
        self.outcomes.append(outcome)
        usage = self.prompt_usage(outcome.body)
        model = body.get("model", "claude-fake")
        if not body.get("stream"):
            if not isinstance(behaviour, Reply):
                return error_response(HttpError(500, "api_error", "stream-only behaviour"))
            return JSONResponse(message_json(behaviour, model, usage))
        return StreamingResponse(
            self._events(behaviour, model, usage, outcome), media_type="text/event-stream"
        )

    async def _events(
        self,
        behaviour: Reply | ErrorAfter | Stall | Disconnect,
        model: str,
        usage: PromptUsage,
        outcome: ContextOutcome,
    ) -> AsyncIterator[bytes]:
        start = message_json(Reply(text=""), model, usage)
        start["content"], start["stop_reason"] = [], None
        start["usage"]["output_tokens"] = 1
        yield sse({"type": "message_start", "message": start}, "message_start")
        for event, name in compaction_events(outcome):
            yield sse(event, name)
        first = 1 if outcome.compaction is not None else 0
        text = behaviour.text
        block = {
            "type": "content_block_start",
            "index": first,
            "content_block": {"type": "text", "text": ""},
        }
        if text:
            yield sse(block, "content_block_start")
            yield sse({"type": "ping"}, "ping")
        words = split_words(text)
        limit = len(words) if isinstance(behaviour, Reply) else behaviour.deltas
        for word in words[:limit]:
            if isinstance(behaviour, Reply) and behaviour.delay:
                await self.pause(behaviour.delay)
            delta = {"type": "text_delta", "text": word}
            yield sse(
                {"type": "content_block_delta", "index": first, "delta": delta},
                "content_block_delta",
            )
        if isinstance(behaviour, ErrorAfter):
            error = {"type": behaviour.error_type, "message": behaviour.message}
            yield sse({"type": "error", "error": error}, "error")
            return
        if isinstance(behaviour, Disconnect):
            return
        if isinstance(behaviour, Stall):
            await self.pause(behaviour.seconds)
            return
        if text:
            yield sse({"type": "content_block_stop", "index": first}, "content_block_stop")
        for index, tool in enumerate(behaviour.tool_uses, start=first + (1 if text else 0)):
            tool_block = {
                "type": "tool_use",
                "id": tool.id or f"toolu_fake{next(_ids)}",
                "name": tool.name,
                "input": {},
            }
            yield sse(
                {"type": "content_block_start", "index": index, "content_block": tool_block},
                "content_block_start",
            )
            raw = json.dumps(tool.input)
            for piece in (raw[i : i + 7] for i in range(0, len(raw), 7)):
                delta = {"type": "input_json_delta", "partial_json": piece}
                yield sse(
                    {"type": "content_block_delta", "index": index, "delta": delta},
                    "content_block_delta",
                )
            yield sse({"type": "content_block_stop", "index": index}, "content_block_stop")
        reply_usage: dict[str, Any] = usage.as_dict(output_tokens(behaviour))
        final: dict[str, Any] = {
            "type": "message_delta",
            "delta": {"stop_reason": behaviour.final_stop_reason(), "stop_sequence": None},
            "usage": {**reply_usage, "iterations": iterations(outcome, reply_usage) or None},
        }
        if "context_management" in outcome.body:
            final["context_management"] = {"applied_edits": outcome.applied_edits}
        yield sse(final, "message_delta")
        yield sse({"type": "message_stop"}, "message_stop")

    # --- prompt caching -------------------------------------------------------------------

    def prompt_usage(self, body: dict[str, Any]) -> PromptUsage:
        """Split the prompt's tokens into uncached / read from cache / written to cache, by
        the product's model of the provider's cache (on this process's monotonic clock)."""
        self._cache.min_tokens = self.min_cacheable_tokens
        usage = self._cache.price(anthropic_segments(body, self.tokenizer), time.monotonic())
        return PromptUsage(usage.uncached, usage.read, usage.written)


def prompt_segments(body: dict[str, Any]) -> list[Segment]:
    """The request's blocks in the API's caching order, counted with the fake tokenizer."""
    return anthropic_segments(body, fake_token_count)


def output_tokens(reply: Reply) -> int:
    tool_tokens = sum(fake_token_count(json.dumps(t.input)) for t in reply.tool_uses)
    return max(1, fake_token_count(reply.text) + tool_tokens)


def message_json(reply: Reply, model: str, usage: PromptUsage) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    content += [
        {
            "type": "tool_use",
            "id": t.id or f"toolu_fake{next(_ids)}",
            "name": t.name,
            "input": t.input,
        }
        for t in reply.tool_uses
    ]
    return {
        "id": f"msg_fake{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reply.final_stop_reason(),
        "stop_sequence": None,
        "usage": usage.as_dict(output_tokens(reply)),
    }


def error_response(error: HttpError) -> JSONResponse:
    body = {
        "type": "error",
        "error": {"type": error.error_type, "message": error.message},
        "request_id": "req_fake",
    }
    return JSONResponse(
        body, status_code=error.status, headers={"request-id": "req_fake", **error.headers}
    )
