"""The tool-use loop: stream, run the tools the model asked for, continue, repeat.

Provider-neutral: it works with any :class:`~chatplatform.core.llm.base.Provider` whose stream ends
with ``Done(stop_reason="tool_use")`` after :class:`ToolCall` events.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Literal

from .base import (
    ChatRequest,
    Compaction,
    CompactionPart,
    ContentPart,
    ContextEdited,
    Done,
    Provider,
    RequestMessage,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolResultPart,
    ToolUsePart,
    Usage,
)
from .errors import ProviderUnavailable

logger = logging.getLogger(__name__)

ToolExecutor = Callable[[ToolCall], Awaitable[str]]
"""Runs one tool call and returns its result as text (JSON is customary). An exception it
raises is reported to the model as an error result (``is_error``), not to the caller."""


async def stream_with_tools(
    provider: Provider,
    request: ChatRequest,
    executor: ToolExecutor,
    *,
    max_rounds: int = 3,
    client_tools: frozenset[str] = frozenset(),
) -> AsyncIterator[StreamEvent]:
    """Stream a reply, executing tool calls for at most ``max_rounds`` rounds.

    Yields every :class:`TextDelta` and :class:`ToolCall` as it arrives, the turn's running
    :class:`Usage` whenever a call reports some, then one :class:`Usage` and one :class:`Done`
    whose usage is the sum over all model calls. After
    ``max_rounds`` rounds of tools the model is called once more with ``tool_choice="none"``,
    so the turn always ends in text. Provider errors propagate (each model call is retried by
    the provider before its first token, as usual).

    A round that calls any of ``client_tools`` (tools the client runs itself) ends the turn
    there, ``Done("tool_use")``: its calls go to the client, whose results come as the next
    message; the platform's own calls of that round are not run. The first round asks for
    the request's own ``tool_choice``; later ones leave the choice to the model.
    """
    messages = list(request.messages)
    total = Usage()
    for round_number in range(max_rounds + 1):
        last_round = round_number == max_rounds
        round_request = replace(request, messages=tuple(messages))
        if last_round or round_number:
            choice: Literal["none", "auto"] = "none" if last_round else "auto"
            round_request = replace(round_request, tool_choice=choice, tool_name="")
        text: list[str] = []
        calls: list[ToolCall] = []
        compacted: CompactionPart | None = None
        done: Done | None = None
        async for event in provider.stream(round_request):
            if isinstance(event, TextDelta):
                text.append(event.text)
                yield event
            elif isinstance(event, ToolCall):
                calls.append(event)
                yield event
            elif isinstance(event, Compaction | ContextEdited):
                # The provider's own context management: the caller records it.
                if isinstance(event, Compaction):
                    compacted = event.part
                yield event
            elif isinstance(event, Usage):
                # A call's usage so far (its prompt, reported as the reply starts): passed
                # on as the turn's running total, so a reply stopped midway is billed.
                yield total + event
            elif isinstance(event, Done):
                done = event
        if done is None:  # pragma: no cover - providers raise instead of ending without Done
            raise ProviderUnavailable("stream ended without a final event")
        total = total + done.usage
        if done.stop_reason != "tool_use" or not calls:
            yield total
            yield Done(done.stop_reason, total)
            return
        if any(call.name in client_tools for call in calls):
            yield total
            yield Done("tool_use", total)
            return
        if last_round:
            break
        # With a compaction block in it, the provider drops what precedes the block.
        messages.append(_assistant_turn("".join(text), calls, compacted))
        messages.append(RequestMessage("user", [await _run(executor, call) for call in calls]))
    logger.warning("model still asked for tools after %d rounds", max_rounds)
    yield total
    yield Done("max_tool_rounds", total)


def _assistant_turn(
    text: str, calls: list[ToolCall], compacted: CompactionPart | None
) -> RequestMessage:
    parts: list[ContentPart] = [compacted] if compacted is not None else []
    parts += [TextPart(text)] if text else []
    parts.extend(ToolUsePart(call.id, call.name, call.input) for call in calls)
    return RequestMessage("assistant", parts)


async def _run(executor: ToolExecutor, call: ToolCall) -> ToolResultPart:
    try:
        result = await executor(call)
    except Exception as exc:
        # The model can recover from a failed tool (apologise, try differently); the turn
        # should not fail because e.g. a fact was too long.
        logger.warning("tool %s failed: %s", call.name, exc)
        return ToolResultPart(call.id, json.dumps({"error": str(exc)}), is_error=True)
    return ToolResultPart(call.id, result)
