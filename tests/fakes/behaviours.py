"""What a fake model server does for one request; tests queue these per test.

A fake takes the next behaviour from its script for each model request (``Reply`` with its
default text when the script is empty). Errors use the provider's real wire format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FakeToolUse:
    """A tool call the fake model makes; ``id`` is generated when empty."""

    name: str
    input: dict[str, Any]
    id: str = ""


@dataclass(frozen=True)
class Reply:
    """A normal reply: ``text`` streamed in word-sized deltas, then the tool calls.

    ``stop_reason`` defaults to "tool_use" when there are tool calls, else "end_turn".
    ``delay`` seconds are slept between deltas.
    """

    text: str = "Hello from the fake model."
    tool_uses: tuple[FakeToolUse, ...] = ()
    stop_reason: str | None = None
    delay: float = 0.0

    def deltas(self) -> list[str]:
        return split_words(self.text)

    def final_stop_reason(self) -> str:
        return self.stop_reason or ("tool_use" if self.tool_uses else "end_turn")


@dataclass(frozen=True)
class HttpError:
    """An HTTP error response; ``error_type`` goes in the body (Anthropic/OpenAI format)."""

    status: int
    error_type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)
    code: str | None = None


@dataclass(frozen=True)
class ErrorAfter:
    """Stream ``deltas`` text deltas of ``text`` (200 OK), then an in-stream error."""

    deltas: int
    error_type: str = "overloaded_error"
    message: str = "Overloaded"
    text: str = "This reply will be cut off in the middle of a sentence."


@dataclass(frozen=True)
class Stall:
    """Stream ``deltas`` text deltas of ``text``, then go silent for ``seconds``.

    The silence ends early when the fake is reset (so teardown never waits for it).
    """

    deltas: int
    seconds: float = 5.0
    text: str = "This reply stalls after a few words and never finishes."


@dataclass(frozen=True)
class Disconnect:
    """Stream ``deltas`` text deltas, then end the body without the closing events."""

    deltas: int
    text: str = "This reply ends abruptly without the final events."


Behaviour = Reply | HttpError | ErrorAfter | Stall | Disconnect


def split_words(text: str) -> list[str]:
    """Word-sized chunks whose concatenation is ``text``."""
    return re.findall(r"\S+\s*|\s+", text)


def fake_token_count(text: str) -> int:
    """The fakes' deterministic tokenizer: about 4 characters a token."""
    return (len(text) + 3) // 4


# Anthropic-style errors, by name.
def overloaded() -> HttpError:
    return HttpError(529, "overloaded_error", "Overloaded")


def rate_limited(retry_after: float = 1) -> HttpError:
    return HttpError(
        429,
        "rate_limit_error",
        "Number of request tokens has exceeded your per-minute rate limit",
        headers={"retry-after": f"{retry_after:g}"},
    )


def spend_cap() -> HttpError:
    return HttpError(429, "rate_limit_error", "You have reached your specified API usage limits")


def prompt_too_long(tokens: int = 210632, maximum: int = 200000) -> HttpError:
    message = f"prompt is too long: {tokens} tokens > {maximum} maximum"
    return HttpError(400, "invalid_request_error", message)


def request_too_large() -> HttpError:
    return HttpError(
        413, "request_too_large", "Request exceeds the maximum allowed number of bytes"
    )


def server_error(status: int = 500) -> HttpError:
    return HttpError(status, "api_error", "Internal server error")


def invalid_request(message: str = "messages: field required") -> HttpError:
    return HttpError(400, "invalid_request_error", message)


# OpenAI-compatible servers' errors (vLLM, llama.cpp, OpenAI), by name.
def context_length_exceeded(requested: int = 9000, maximum: int = 8192) -> HttpError:
    message = (
        f"This model's maximum context length is {maximum} tokens. However, you requested "
        f"{requested} tokens. Please reduce the length of the messages."
    )
    return HttpError(400, "invalid_request_error", message, code="context_length_exceeded")
