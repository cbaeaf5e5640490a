"""Summarizers: a model engine (structured JSON, validated, one retry) and an extractive
engine that needs no model. Everything but :mod:`.engine` is free of Django."""

from .extractive import ExtractiveSummarizer
from .model import ModelSummarizer
from .render import render_summary
from .types import (
    EXTRACTIVE_MODEL,
    SourceMessage,
    SourceSummary,
    StructuredSummary,
    Summarizer,
    SummaryDraft,
    SummaryFailed,
    SummaryUnavailable,
)
from .validation import SummaryInvalid, check_size, parse_structured

__all__ = [
    "EXTRACTIVE_MODEL",
    "ExtractiveSummarizer",
    "ModelSummarizer",
    "SourceMessage",
    "SourceSummary",
    "StructuredSummary",
    "Summarizer",
    "SummaryDraft",
    "SummaryFailed",
    "SummaryInvalid",
    "SummaryUnavailable",
    "check_size",
    "parse_structured",
    "render_summary",
]
