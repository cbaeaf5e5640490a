"""Model providers behind one async streaming interface. Pure: nothing here imports Django.

``build_provider_or_offline(name, api_key=..., base_url=..., timeout=...)`` returns a
:class:`Provider`; ``provider.stream(ChatRequest(...))`` yields ``TextDelta`` / ``ToolCall``,
then ``Usage`` and ``Done``, or raises a :class:`ProviderError` subclass.
Each provider is one entry of :mod:`.providers` (:class:`ProviderKind`), which answers for it.
Importing this package imports the provider registry and with it both SDKs (``anthropic``,
``openai``): a process pays for them once, at start-up, not on its first reply.
"""

from .base import (
    AuthenticationFailed,
    ChatRequest,
    ContextReport,
    ContextSection,
    Done,
    ImagePart,
    InvalidRequest,
    Overloaded,
    PromptTooLong,
    Provider,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    RequestMessage,
    RequestTooLarge,
    SpendCapReached,
    StreamEvent,
    StreamInterrupted,
    StreamStalled,
    TextDelta,
    TextPart,
    ToolCall,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
    Usage,
    message_text,
)
from .providers import (
    PROVIDER_NAMES,
    ProviderKind,
    UnknownProvider,
    build_provider,
    build_provider_or_offline,
    provider_kind,
)
from .retry import RetryPolicy
from .tool_loop import ToolExecutor, stream_with_tools
from .tools import FACT_TOOLS, GET_USER_FACTS, SAVE_USER_FACT

__all__ = [
    "FACT_TOOLS",
    "GET_USER_FACTS",
    "PROVIDER_NAMES",
    "SAVE_USER_FACT",
    "AuthenticationFailed",
    "ChatRequest",
    "ContextReport",
    "ContextSection",
    "Done",
    "ImagePart",
    "InvalidRequest",
    "Overloaded",
    "PromptTooLong",
    "Provider",
    "ProviderError",
    "ProviderKind",
    "ProviderUnavailable",
    "RateLimited",
    "RequestMessage",
    "RequestTooLarge",
    "RetryPolicy",
    "SpendCapReached",
    "StreamEvent",
    "StreamInterrupted",
    "StreamStalled",
    "TextDelta",
    "TextPart",
    "ToolCall",
    "ToolExecutor",
    "ToolResultPart",
    "ToolSpec",
    "ToolUsePart",
    "UnknownProvider",
    "Usage",
    "build_provider",
    "build_provider_or_offline",
    "message_text",
    "provider_kind",
    "stream_with_tools",
]
