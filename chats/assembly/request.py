"""The provider request of a turn: messages, cache breakpoints, the attached image."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chatplatform.core.llm.base import (
    ChatRequest,
    ContextReport,
    ContextSection,
    ImagePart,
    TextPart,
)
from chatplatform.core.llm.base import Message as LlmMessage
from chatplatform.core.llm.prompt_cache import CacheUsage, full_history_usage, still_cached
from chatplatform.core.llm.tools import FACT_TOOLS
from chatplatform.models.conversations import Conversation, Message
from chats.assembly.service import TurnContext
from chats.images import ImageRejected, describe_image, image_tokens, inspect_image


def _context_report(turn: TurnContext) -> ContextReport:
    prompt = turn.prompt
    dropped: dict[str, int] = {}
    for kind, *_rest in prompt.excluded:
        dropped[kind] = dropped.get(kind, 0) + 1
    return ContextReport(
        sections=tuple(
            ContextSection(s.name, s.used, s.items, dropped.get(s.name, 0)) for s in prompt.sections
        ),
        facts=tuple(f.text[:120] for f in turn.facts),
        retrieved=tuple(str(i) for i in turn.retrieved_ids[:10]),
        budget_tokens=prompt.budget,
        counter=prompt.counter_name,
        strategy=prompt.strategy,
        prompt_tokens=prompt.prompt_tokens,
    )


@dataclass
class AttachedImage:
    """The new message's image: sent as an image block to a vision model (``tokens`` > 0),
    otherwise described in the text (``note``)."""

    media_type: str
    data_base64: str
    tokens: int
    note: str
    prompt_budget: int


def attached_image(message: Message, policy: Any) -> AttachedImage | None:
    if not message.attachment:
        return None
    profile = policy.model_profile
    prompt_budget = (
        min(policy.max_context_tokens, profile.context_window) - policy.reserved_response_tokens
    )
    with message.attachment.open("rb") as handle:
        data = handle.read()
    try:
        info = inspect_image(data, message.attachment_type or None)
    except ImageRejected:
        return AttachedImage("", "", 0, "[An attached image could not be read.]", prompt_budget)
    if profile.supports_vision:
        tokens = image_tokens(profile.provider, info.width, info.height)
        encoded = base64.b64encode(data).decode()
        return AttachedImage(info.media_type, encoded, tokens, "", prompt_budget)
    return AttachedImage(info.media_type, "", 0, describe_image(info), prompt_budget)


def chat_request(turn: TurnContext, tools: bool, image: AttachedImage | None = None) -> ChatRequest:
    """The request answering ``turn``: the system prompt as one cached block; for Anthropic,
    one content block per turn with breakpoints at the end of the history and on the new
    message (:func:`message_breakpoints`); the turn's tail after them."""
    prompt = turn.prompt
    per_block = turn.profile.provider == "anthropic" and len(prompt.blocks) == len(prompt.messages)
    messages: list[LlmMessage] = []
    for i, m in enumerate(prompt.messages):
        role: Any = m["role"]
        if per_block and len(prompt.blocks[i]) > 1:
            messages.append(LlmMessage(role, [TextPart(text) for text in prompt.blocks[i]]))
        else:
            messages.append(LlmMessage(role, m["content"]))
    breakpoints = message_breakpoints(turn) if per_block else ()
    if image is not None and image.tokens and messages:
        last = messages[-1]
        parts: list[Any] = (
            [TextPart(last.content)] if isinstance(last.content, str) else list(last.content)
        )
        # The image goes first; the breakpoints of the last message shift by one.
        messages[-1] = LlmMessage(
            "user", [ImagePart(data=image.data_base64, media_type=image.media_type), *parts]
        )
        last_index = len(messages) - 1
        breakpoints = tuple((i, k + 1 if i == last_index else k) for i, k in breakpoints)
    return ChatRequest(
        model=turn.profile.model,
        system=[prompt.system] if prompt.system else [],
        cache_prefix=1 if prompt.system and prompt.stable_prefix.tokens else 0,
        cache_breakpoints=breakpoints,
        cache_ttl=turn.policy.cache_ttl,
        messages=messages,
        tools=FACT_TOOLS if tools else (),
        max_tokens=turn.policy.reserved_response_tokens,
        context_report=_context_report(turn),
    )


def message_breakpoints(turn: TurnContext) -> tuple[tuple[int, int], ...]:
    """(message, block) of the history's last block and of the new message's block, each
    only where the prefix up to it reaches the model's minimum cacheable length (a shorter
    one is not cached, and a breakpoint on it would be wasted)."""
    prompt = turn.prompt
    if not prompt.blocks:
        return ()
    last = len(prompt.blocks) - 1
    new_block = len(prompt.blocks[last]) - (2 if prompt.tail else 1)
    new_tokens = next((i.tokens for i in prompt.included if i.kind == "new_message"), 0)
    up_to_new = prompt.prompt_tokens - prompt.tail_tokens
    minimum = turn.profile.cache_min_tokens
    marks: list[tuple[int, int]] = []
    if up_to_new - new_tokens >= minimum:
        if new_block > 0:
            marks.append((last, new_block - 1))
        elif last > 0:
            marks.append((last - 1, len(prompt.blocks[last - 1]) - 1))
    if up_to_new >= minimum:
        marks.append((last, new_block))
    return tuple(marks)


def full_history_usage_for(
    turn: TurnContext, conversation: Conversation, now: datetime
) -> CacheUsage:
    """How the provider would have billed this turn sending the whole history with a
    breakpoint on the newest message: it reads what the previous turn's whole history left
    in the cache while that is younger than the five-minute lifetime (``conversation`` as it
    was before this turn)."""
    warm = still_cached(conversation.window_sent_at, now)
    previous = conversation.window_full_tokens if warm else None
    anthropic = turn.profile.provider == "anthropic"
    return full_history_usage(
        turn.hypothetical_tokens,
        previous or None,
        min_tokens=turn.profile.cache_min_tokens if anthropic else 0,
    )
