"""A local server speaking OpenAI's chat-completions API (as Ollama, vLLM, llama.cpp do).

``POST /v1/chat/completions``: JSON, or SSE ``data: {chunk}`` lines ending with a usage chunk
(when ``stream_options.include_usage``) and ``data: [DONE]``; tool calls stream as
``delta.tool_calls`` with argument fragments. A request whose tool calls and results are not
paired is refused as the API refuses it (``tool_pairing``). Errors on demand, requests
recorded.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .behaviours import (
    Disconnect,
    ErrorAfter,
    HttpError,
    Reply,
    Stall,
    fake_token_count,
    split_words,
)
from .common import FakeServer, sse
from .tool_pairing import openai_pairing_error

MESSAGE_TOKENS = 3  # framing per chat message
_ids = itertools.count(1)
FINISH_REASONS = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


class FakeOpenAI(FakeServer):
    @property
    def completion_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests_to("/v1/chat/completions")]

    def app(self) -> Starlette:
        return Starlette(
            routes=[Route("/v1/chat/completions", self._completions, methods=["POST"])]
        )

    async def _completions(self, request: Request) -> Response:
        body = await self.record(request)
        if (unpaired := openai_pairing_error(body)) is not None:
            return error_response(unpaired)
        behaviour = self.next_behaviour()
        if isinstance(behaviour, HttpError):
            return error_response(behaviour)
        model = body.get("model", "fake-model")
        usage = {"prompt_tokens": prompt_tokens(body)}
        if not body.get("stream"):
            if not isinstance(behaviour, Reply):
                return error_response(HttpError(500, "server_error", "stream-only behaviour"))
            return JSONResponse(completion_json(behaviour, model, usage["prompt_tokens"]))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events = self._chunks(behaviour, model, usage["prompt_tokens"], include_usage)
        return StreamingResponse(events, media_type="text/event-stream")

    async def _chunks(
        self,
        behaviour: Reply | ErrorAfter | Stall | Disconnect,
        model: str,
        prompt: int,
        include_usage: bool,
    ) -> AsyncIterator[bytes]:
        chunk_id = f"chatcmpl-fake{next(_ids)}"

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            return sse(_envelope(chunk_id, model, choices=[choice]))

        yield chunk({"role": "assistant", "content": ""})
        words = split_words(behaviour.text)
        limit = len(words) if isinstance(behaviour, Reply) else behaviour.deltas
        for word in words[:limit]:
            if isinstance(behaviour, Reply) and behaviour.delay:
                await self.pause(behaviour.delay)
            yield chunk({"content": word})
        if isinstance(behaviour, ErrorAfter):
            yield sse(
                {
                    "error": {
                        "message": behaviour.message,
                        "type": behaviour.error_type,
                        "code": None,
                    }
                }
            )
            return
        if isinstance(behaviour, Disconnect):
            return
        if isinstance(behaviour, Stall):
            await self.pause(behaviour.seconds)
            return
        for index, tool in enumerate(behaviour.tool_uses):
            call = {
                "index": index,
                "id": tool.id or f"call_fake{next(_ids)}",
                "type": "function",
                "function": {"name": tool.name, "arguments": ""},
            }
            yield chunk({"tool_calls": [call]})
            raw = json.dumps(tool.input)
            for piece in (raw[i : i + 7] for i in range(0, len(raw), 7)):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        finish = FINISH_REASONS.get(behaviour.final_stop_reason(), "stop")
        yield chunk({}, finish)
        if include_usage:
            completion = completion_tokens(behaviour)
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": 0},
            }
            yield sse(_envelope(chunk_id, model, choices=[], usage=usage))
        yield sse("[DONE]")


def _envelope(chunk_id: str, model: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        **fields,
    }


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def prompt_tokens(body: dict[str, Any]) -> int:
    messages = body.get("messages", [])
    text = sum(fake_token_count(_text_of(m.get("content"))) for m in messages)
    return text + MESSAGE_TOKENS * len(messages)


def completion_tokens(reply: Reply) -> int:
    tools = sum(fake_token_count(json.dumps(t.input)) for t in reply.tool_uses)
    return max(1, fake_token_count(reply.text) + tools)


def completion_json(reply: Reply, model: str, prompt: int) -> dict[str, Any]:
    completion = completion_tokens(reply)
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    finish = FINISH_REASONS.get(reply.final_stop_reason(), "stop")
    return {
        "id": f"chatcmpl-fake{next(_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def error_response(error: HttpError) -> JSONResponse:
    body = {
        "error": {
            "message": error.message,
            "type": error.error_type,
            "param": None,
            "code": error.code,
        }
    }
    return JSONResponse(body, status_code=error.status, headers=error.headers)
