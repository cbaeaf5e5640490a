"""Local HTTP servers that speak the model providers' protocols, so tests drive the real SDKs."""

from .anthropic_fake import FakeAnthropic
from .behaviours import (
    Disconnect,
    ErrorAfter,
    FakeToolUse,
    HttpError,
    Reply,
    Stall,
)
from .openai_fake import FakeOpenAI

__all__ = [
    "Disconnect",
    "ErrorAfter",
    "FakeAnthropic",
    "FakeOpenAI",
    "FakeToolUse",
    "HttpError",
    "Reply",
    "Stall",
]
