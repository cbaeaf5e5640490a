"""The one streaming interface every model provider implements. Pure: no Django, no SDK.

A reply is requested with a :class:`ChatRequest` and consumed as an async iterator of
:data:`StreamEvent`: zero or more :class:`TextDelta` / :class:`ToolCall`, then one
:class:`Usage` and finally one :class:`Done`. A provider may report usage earlier too (the
prompt's, as the reply starts, as Anthropic's ``message_start`` does): the last
:class:`Usage` is the call's, and one that came before a stop is what the stopped call
billed. A stream that ends without ``Done`` raised a
:class:`~chatplatform.core.llm.errors.ProviderError`; a provider never ends silently on failure.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .context_management import CompactionPart, ContextManagement
from .context_report import ContextReport, ContextSection
from .errors import (
    AuthenticationFailed,
    InvalidRequest,
    Overloaded,
    PromptTooLong,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    RequestTooLarge,
    SpendCapReached,
    StreamInterrupted,
    StreamStalled,
)
from .summary_request import SummaryTask

__all__ = [
    "AuthenticationFailed",
    "ChatRequest",
    "Compaction",
    "CompactionPart",
    "ContextEdited",
    "ContextManagement",
    "ContextReport",
    "ContextSection",
    "Done",
    "ImagePart",
    "InvalidRequest",
    "Overloaded",
    "PromptTooLong",
    "Provider",
    "ProviderError",
    "ProviderUnavailable",
    "RateLimited",
    "RequestMessage",
    "RequestTooLarge",
    "SpendCapReached",
    "StreamEvent",
    "StreamInterrupted",
    "StreamStalled",
    "TextDelta",
    "TextPart",
    "ToolCall",
    "ToolResultPart",
    "ToolSpec",
    "ToolUsePart",
    "Usage",
    "message_text",
]

Role = Literal["user", "assistant"]
# Normalised across providers: "end_turn" | "max_tokens" | "tool_use" | "stop_sequence" |
# "refusal" | "model_context_window_exceeded" | "max_tool_rounds" (tool loop gave up), or the
# provider's own word otherwise.
StopReason = str


# --- request --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    """An inline image: ``data`` is base64 (no ``data:`` prefix), e.g. media type image/png."""

    data: str
    media_type: str


@dataclass(frozen=True)
class ToolUsePart:
    """An assistant's request to run a tool (sent back in the follow-up of a tool round)."""

    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ToolResultPart:
    """The result of running a tool, sent in a user message; ``content`` is text (often JSON)."""

    tool_use_id: str
    content: str
    is_error: bool = False


ContentPart = TextPart | ImagePart | ToolUsePart | ToolResultPart | CompactionPart


@dataclass(frozen=True)
class RequestMessage:
    role: Role
    content: str | Sequence[ContentPart]


def message_text(message: RequestMessage) -> str:
    """The plain text of a message (text parts joined; images and tool parts left out)."""
    if isinstance(message.content, str):
        return message.content
    return "\n".join(p.text for p in message.content if isinstance(p, TextPart))


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call; ``input_schema`` is a JSON Schema of type object."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ChatRequest:
    """Everything one model call needs.

    ``system`` is a string or a list of text blocks, stable blocks first. ``cache_prefix`` is
    how many leading system blocks are stable across turns (system prompt, long-lived
    summaries, facts): providers with prompt caching put the cache breakpoint on the last of
    them, so tool definitions and those blocks are cached and per-turn parts come after the
    breakpoint. With ``system`` a string, any ``cache_prefix >= 1`` marks all of it stable.
    With ``cache_prefix == 0`` only the tool definitions (if any) are cached.

    ``cache_breakpoints`` mark message blocks (at most four breakpoints in all, the system's
    first); ``cache_ttl`` is the lifetime asked for every breakpoint.

    ``timeout`` (seconds) bounds each HTTP request (connect + each read); ``idle_timeout``
    (seconds) is the longest gap allowed between two stream events before the stream counts
    as stalled. ``None`` means the provider's default for either. ``tool_choice="none"``
    forbids tool calls while keeping the definitions (which the provider needs when the
    history holds tool blocks). ``context_report`` describes what
    the assembly put in the prompt and ``summary_task`` what a summarisation request is
    about; only the offline provider reads them. ``temperature`` is
    sent to OpenAI-compatible servers only (the Anthropic SDK in use has no such parameter).
    """

    model: str
    messages: Sequence[RequestMessage]
    system: str | Sequence[str] = ""
    cache_prefix: int = 0
    #: Content blocks to mark as cache breakpoints too, as (message index, part index): the
    #: end of the history and the new message, so the next turn reads what this one wrote.
    cache_breakpoints: tuple[tuple[int, int], ...] = ()
    #: How long the provider should keep what is marked: ``"5m"`` or ``"1h"``.
    cache_ttl: str = "5m"
    tools: Sequence[ToolSpec] = ()
    #: ``any``: the model must call one of the tools; ``tool_name``, when set, the one it
    #: must call (``tool_choice`` then does not apply).
    tool_choice: Literal["auto", "none", "any"] = "auto"
    tool_name: str = ""
    max_tokens: int = 1024
    temperature: float | None = None
    timeout: float | None = None
    idle_timeout: float | None = None
    context_report: ContextReport | None = None
    summary_task: SummaryTask | None = None
    #: The provider's own context management (server compaction, context editing), sent only
    #: to providers that offer it (Anthropic).
    context_management: ContextManagement = field(default_factory=ContextManagement)

    def system_blocks(self) -> list[str]:
        """``system`` as a list of non-empty blocks."""
        blocks = [self.system] if isinstance(self.system, str) else list(self.system)
        return [b for b in blocks if b]

    def stable_system_blocks(self) -> int:
        """How many leading entries of :meth:`system_blocks` are stable (clamped)."""
        return max(0, min(self.cache_prefix, len(self.system_blocks())))


# --- stream events --------------------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCall:
    """A complete tool call (emitted once its input is fully received)."""

    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    """Tokens as the provider reported them.

    ``input_tokens`` excludes cached tokens: the prompt's total is
    ``input_tokens + cache_read_tokens + cache_write_tokens`` (:attr:`total_input_tokens`).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True)
class Compaction:
    """The provider compacted the conversation while answering: ``part`` is the block to send
    back first on later turns; ``usage`` is what the compaction's own sampling was billed
    (apart from the reply's usage)."""

    part: CompactionPart
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class ContextEdited:
    """What the provider's context editing cleared, as it reported it (``applied_edits``:
    type, cleared_input_tokens, cleared_tool_uses or cleared_thinking_turns)."""

    applied_edits: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Done:
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)


StreamEvent = TextDelta | ToolCall | Usage | Compaction | ContextEdited | Done


# --- provider -------------------------------------------------------------------------------


class Provider(ABC):
    """An async streaming model provider.

    ``stream(request)`` yields :data:`StreamEvent` and raises only ``ProviderError``.
    Transient failures are retried by the provider itself (per its retry policy), and only
    before the first event reached the caller. ``offline`` is True for the built-in provider
    that is not a language model, so the UI can label its replies.
    """

    name: str = "abstract"
    offline: bool = False

    @abstractmethod
    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Stream one reply to ``request``."""

    async def aclose(self) -> None:
        """Release connections; the provider must not be used afterwards."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
