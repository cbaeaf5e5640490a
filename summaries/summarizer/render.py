"""Rendering a structured summary to the text that enters prompts. Pure."""

from __future__ import annotations

from .types import StructuredSummary

FACTS_HEADING = "Facts:"
QUESTIONS_HEADING = "Open questions:"


def render_summary(content: StructuredSummary) -> str:
    """``summary``, then the facts and the open questions as bullet lists (when any)."""
    parts = [content.summary.strip()]
    if content.facts:
        parts.append(FACTS_HEADING + "\n" + "\n".join(f"- {_line(f)}" for f in content.facts))
    if content.open_questions:
        parts.append(
            QUESTIONS_HEADING + "\n" + "\n".join(f"- {_line(q)}" for q in content.open_questions)
        )
    return "\n\n".join(p for p in parts if p)


def _line(text: str) -> str:
    return " ".join(text.split())
