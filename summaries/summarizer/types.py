"""Data types of the summarizer. Pure: nothing here imports Django.

A summary is structured: ``summary`` (prose or speaker lines), ``facts`` (concrete
details worth keeping: numbers, dates, names), ``open_questions`` (asked, not answered) and
``instructions`` (the users' standing instructions and preferences, quoted verbatim). It is
stored as JSON (``Summary.content``) and rendered to text (``Summary.text``), the form that
enters prompts and whose tokens are counted against the summary's size. The instructions are
not rendered: they are kept as the user's own memories (by the ``chats`` app, which reads
them from the stored content), and a prompt sends them in a section of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

#: Bumped whenever a prompt or the extractive algorithm changes what a summary contains.
EXTRACTIVE_VERSION = "extractive-1"
MODEL_PROMPT_VERSION = "json-2"
#: ``Summary.model`` of summaries made without a model.
EXTRACTIVE_MODEL = "extractive"


@dataclass(frozen=True, slots=True)
class SourceMessage:
    """One message to summarise (already stored; ``seq`` orders them)."""

    seq: int
    role: str
    content: str
    author: str = ""
    created_at: datetime | None = None
    id: int | None = None


@dataclass(frozen=True, slots=True)
class StructuredSummary:
    summary: str
    facts: tuple[str, ...] = ()
    open_questions: tuple[str, ...] = ()
    #: Standing instructions and preferences users gave, verbatim (stored only when any).
    instructions: tuple[str, ...] = ()

    def as_content(self) -> dict[str, Any]:
        content: dict[str, Any] = {
            "summary": self.summary,
            "facts": list(self.facts),
            "open_questions": list(self.open_questions),
        }
        if self.instructions:
            content["instructions"] = list(self.instructions)
        return content

    @classmethod
    def from_content(cls, content: Any) -> StructuredSummary:
        """Read stored JSON back (tolerant: missing lists are empty)."""
        if not isinstance(content, dict):
            return cls(summary=str(content or ""))
        return cls(
            summary=str(content.get("summary") or ""),
            facts=tuple(str(f) for f in content.get("facts") or () if str(f).strip()),
            open_questions=tuple(
                str(q) for q in content.get("open_questions") or () if str(q).strip()
            ),
            instructions=tuple(str(i) for i in content.get("instructions") or () if str(i).strip()),
        )


@dataclass(frozen=True, slots=True)
class SourceSummary:
    """An existing summary to merge into a higher-level one."""

    first_seq: int
    last_seq: int
    content: StructuredSummary


@dataclass(frozen=True)
class SummaryDraft:
    """A validated summary ready to be stored, with what it cost to make."""

    content: StructuredSummary
    text: str
    token_count: int
    token_counter: str
    model: str
    prompt_version: str
    engine: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: Decimal = field(default_factory=lambda: Decimal(0))
    attempts: int = 1


class SummaryFailed(Exception):
    """No valid summary could be made; nothing is stored and raw history stays in use."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class SummaryUnavailable(Exception):
    """A transient failure (the provider is overloaded, unreachable...): try again later."""

    def __init__(self, code: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after


class Summarizer(Protocol):
    """What the services need from an engine."""

    engine: str
    model: str

    def summarize_messages(
        self, messages: Sequence[SourceMessage], *, max_tokens: int, purpose: str = "rolling"
    ) -> SummaryDraft:
        """Summarise ``messages`` (chronological) in at most ``max_tokens`` tokens of text."""
        ...

    def merge_summaries(
        self, summaries: Sequence[SourceSummary], *, max_tokens: int
    ) -> SummaryDraft:
        """Merge older summaries (chronological) into one of at most ``max_tokens`` tokens."""
        ...
