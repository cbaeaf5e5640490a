"""The provider request of a turn: messages, cache breakpoints, the attached image."""

from __future__ import annotations

import base64
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chatplatform.core.context.formatting import CONVERSATION_START
from chatplatform.core.context.strategies import strategy_for
from chatplatform.core.llm.base import (
    ChatRequest,
    CompactionPart,
    ContentPart,
    ImagePart,
    RequestMessage,
    TextPart,
    ToolSpec,
)
from chatplatform.core.llm.context_management import (
    EDITING_CHOICES,
    TRIGGER_PERCENT,
    ContextManagement,
    compaction_trigger,
)
from chatplatform.core.llm.context_report import (
    SECTION_OF_KIND,
    ContextReport,
    ContextSection,
    LeftOut,
    PromptMessage,
    PromptSummary,
)
from chatplatform.core.llm.prompt_cache import CacheUsage, full_history_usage, still_cached
from chatplatform.core.llm.tool_rounds import with_tool_parts
from chatplatform.core.llm.tools import FACT_TOOLS
from chatplatform.models.conversations import Conversation, Message
from chats.assembly.selectors import tool_turns
from chats.assembly.service import TurnContext
from chats.images import ImageRejected, describe_image, inspect_image

#: Characters of a message kept in the report's excerpts.
EXCERPT_CHARS = 80
#: At most this many retrieved messages are named in the report (the count is always given).
MAX_NAMED_MESSAGES = 10


def _context_report(turn: TurnContext) -> ContextReport:
    """What the prompt holds, from the assembled prompt itself (the items it included and
    excluded, as the turn record stores them), with messages named by their seq."""
    prompt = turn.prompt
    included: dict[str, list[Any]] = {}
    for item in prompt.included:
        included.setdefault(item.kind, []).append(item.id)
    left_out: Counter[tuple[str, str]] = Counter((e.kind, e.reason) for e in prompt.excluded)
    dropped: Counter[str] = Counter()
    for (kind, _reason), count in left_out.items():
        dropped[SECTION_OF_KIND.get(kind, kind)] += count
    history = sorted(
        turn.messages[i].seq for i in included.get("message", ()) if i in turn.messages
    )
    retrieved = sorted(
        (turn.messages[i] for i in included.get("retrieved", ()) if i in turn.messages),
        key=lambda m: m.seq,
    )
    facts = {f.id: f for f in turn.facts}
    summaries = {s.id: s for s in turn.summaries}
    return ContextReport(
        sections=tuple(
            ContextSection(s.name, s.used, s.items, dropped[s.name]) for s in prompt.sections
        ),
        facts=tuple(facts[i].text[:120] for i in included.get("fact", ()) if i in facts),
        summaries=tuple(
            PromptSummary(s.kind, s.first_seq, s.last_seq)
            for s in (summaries[i] for i in included.get("summary", ()) if i in summaries)
        ),
        retrieved=tuple(
            PromptMessage(m.seq, m.author or m.role, _excerpt(m.content))
            for m in retrieved[:MAX_NAMED_MESSAGES]
        ),
        history=(history[0], history[-1]) if history else None,
        left_out=tuple(
            LeftOut(kind, reason, count) for (kind, reason), count in left_out.most_common()
        ),
        budget_tokens=prompt.budget,
        counter=prompt.counter_name,
        strategy=prompt.strategy,
        prompt_tokens=prompt.prompt_tokens,
    )


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS].rstrip() + "…"


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
    with message.attachment.open("rb") as handle:
        data = handle.read()
    return image_for_prompt(data, message.attachment_type or None, policy)


def image_for_prompt(data: bytes, media_type: str | None, policy: Any) -> AttachedImage:
    """An image as the model under ``policy`` is shown it: inline with its tokens when the
    model sees images, else a note of what it is."""
    profile = policy.model_profile
    prompt_budget = (
        min(policy.max_context_tokens, profile.context_window) - policy.reserved_response_tokens
    )
    try:
        info = inspect_image(data, media_type)
    except ImageRejected:
        return AttachedImage("", "", 0, "[An attached image could not be read.]", prompt_budget)
    if profile.supports_vision:
        tokens = profile.provider_kind.image_tokens(info.width, info.height)
        encoded = base64.b64encode(data).decode()
        return AttachedImage(info.media_type, encoded, tokens, "", prompt_budget)
    return AttachedImage(info.media_type, "", 0, describe_image(info), prompt_budget)


def offered_specs(offered: Any) -> tuple[ToolSpec, ...]:
    """The tools a client offered with its message (``Message.offered_tools``)."""
    if not offered:
        return ()
    return tuple(
        ToolSpec(str(t["name"]), str(t.get("description") or ""), dict(t["input_schema"]))
        for t in offered.get("tools") or ()
    )


def chat_request(
    turn: TurnContext,
    tools: bool,
    image: AttachedImage | None = None,
    offered: Any = None,
) -> ChatRequest:
    """The request answering ``turn``: the system prompt as one cached block; for a provider
    billed by the breakpoint cache (``ProviderKind.breakpoint_cache``: Anthropic, and the
    offline provider that simulates it), one content block per turn with breakpoints at the
    end of the history and on the new message (:func:`message_breakpoints`); the turn's tail
    after them."""
    prompt = turn.prompt
    per_block = turn.profile.provider_kind.breakpoint_cache and len(prompt.blocks) == len(
        prompt.messages
    )
    messages: list[RequestMessage] = []
    for i, m in enumerate(prompt.messages):
        role: Any = m["role"]
        if per_block and len(prompt.blocks[i]) > 1:
            messages.append(RequestMessage(role, [TextPart(text) for text in prompt.blocks[i]]))
        else:
            messages.append(RequestMessage(role, m["content"]))
    breakpoints = message_breakpoints(turn) if per_block else ()
    if prompt.block_ids:
        messages, breakpoints = with_tool_parts(
            messages,
            prompt.blocks,
            prompt.block_ids,
            tool_turns(turn.tenant_id, [i for ids in prompt.block_ids for i in ids if i]),
            breakpoints,
        )
    if image is not None and image.tokens and messages:
        last = messages[-1]
        parts: list[Any] = (
            [TextPart(last.content)] if isinstance(last.content, str) else list(last.content)
        )
        # The image goes first; the breakpoints of the last message shift by one.
        messages[-1] = RequestMessage(
            "user", [ImagePart(data=image.data_base64, media_type=image.media_type), *parts]
        )
        last_index = len(messages) - 1
        breakpoints = tuple((i, k + 1 if i == last_index else k) for i, k in breakpoints)
    client_tools = offered_specs(offered)
    choice = str((offered or {}).get("choice") or "auto") if client_tools else "auto"
    if turn.compaction_block is not None and _compaction_included(turn):
        messages, breakpoints = with_compaction(messages, breakpoints, turn.compaction_block)
    return ChatRequest(
        model=turn.profile.model,
        system=[prompt.system] if prompt.system else [],
        cache_prefix=1 if prompt.system and prompt.stable_prefix.tokens else 0,
        cache_breakpoints=breakpoints,
        cache_ttl=turn.policy.cache_ttl,
        messages=messages,
        tools=(*(FACT_TOOLS if tools else ()), *client_tools),
        tool_choice="none" if choice == "none" else "any" if choice == "any" else "auto",
        tool_name=str((offered or {}).get("name") or "") if choice == "tool" else "",
        # Within the model's output limit even when the policy no longer fits its model.
        max_tokens=min(turn.policy.reserved_response_tokens, turn.profile.max_output_tokens),
        context_report=_context_report(turn),
        context_management=context_management_for(turn),
    )


def context_management_for(turn: TurnContext) -> ContextManagement:
    """What the policy asks the provider to manage itself: compaction (server compaction) and
    context editing, both triggered at 80% of the prompt budget (compaction never below the
    provider's minimum)."""
    policy = turn.policy
    if not turn.profile.provider_kind.context_management:
        return ContextManagement()
    budget = turn.prompt.budget
    compact = strategy_for(policy.strategy).needs.provider_compaction
    return ContextManagement(
        compact_trigger=compaction_trigger(budget) if compact else None,
        clear=EDITING_CHOICES.get(policy.context_editing, ()),
        clear_trigger=max(1, budget * TRIGGER_PERCENT // 100),
    )


def _compaction_included(turn: TurnContext) -> bool:
    ids = {i.id for i in turn.prompt.included if i.kind == "summary"}
    return any(s.kind == "compaction" and s.id in ids for s in turn.summaries)


def with_compaction(
    messages: list[RequestMessage], breakpoints: tuple[tuple[int, int], ...], block: dict[str, Any]
) -> tuple[list[RequestMessage], tuple[tuple[int, int], ...]]:
    """The provider's compaction block first in the history, as the API expects it (in an
    assistant turn; the provider drops whatever precedes it), marked for caching: it stays the
    same until the next compaction. The history after it starts with the reply that carried
    it (after the synthetic first user turn) or, trimmed, with a user turn."""
    part = CompactionPart(
        block.get("content"), block.get("encrypted_content"), block.get("signature")
    )
    if len(messages) > 1 and messages[0].content == CONVERSATION_START:
        first = messages[1]
        rest: list[ContentPart] = (
            [TextPart(first.content)] if isinstance(first.content, str) else list(first.content)
        )
        messages = [messages[0], RequestMessage(first.role, [part, *rest]), *messages[2:]]
        shifted = tuple((i, k + 1 if i == 1 else k) for i, k in breakpoints)
    else:
        opening = [RequestMessage("user", CONVERSATION_START), RequestMessage("assistant", [part])]
        messages = [*opening, *messages]
        shifted = tuple((i + 2, k) for i, k in breakpoints)
    return messages, ((1, 0), *shifted)


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
    breakpoints = turn.profile.provider_kind.breakpoint_cache
    return full_history_usage(
        turn.hypothetical_tokens,
        previous or None,
        min_tokens=turn.profile.cache_min_tokens if breakpoints else 0,
    )
