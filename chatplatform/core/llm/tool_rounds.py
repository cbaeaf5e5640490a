"""A client's tool rounds in the provider request: the calls and their results as the
provider's own blocks.

The prompt is assembled as text: a reply that called tools reads as its text and one line
per call (``tool_calls_text``), their results as a tool result turn, and the two are kept or
dropped together. When sending, a round whose calls end one provider message and whose
results open the next goes as ``tool_use`` and ``tool_result`` parts (OpenAI: ``tool_calls``
and ``tool`` messages), so the model reads its own calls as calls. A round the prompt does
not hold whole (the calls without their results, say), or whose results do not answer its
calls exactly (one result per call, none for another id: :func:`answers_exactly`), stays
text: providers refuse a call without its result, a result for no call and a call answered
twice.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .base import ContentPart, RequestMessage, TextPart, ToolResultPart, ToolUsePart


@dataclass(frozen=True)
class ToolTurn:
    """A stored message of a tool round: a reply's ``text`` and ``calls``, or ``results``."""

    text: str = ""
    calls: tuple[ToolUsePart, ...] = ()
    results: tuple[ToolResultPart, ...] = ()


def tool_turn(text: str, calls: Any, results: Any) -> ToolTurn | None:
    """The round part of a stored message (its ``tool_calls`` / ``tool_results`` JSON)."""
    if calls:
        return ToolTurn(
            text,
            calls=tuple(
                ToolUsePart(str(c["id"]), str(c["name"]), dict(c.get("input") or {})) for c in calls
            ),
        )
    if results:
        return ToolTurn(
            results=tuple(
                ToolResultPart(
                    str(r["tool_use_id"]), str(r.get("content") or ""), bool(r.get("is_error"))
                )
                for r in results
            )
        )
    return None


def answers_exactly(call_ids: Iterable[str], result_ids: Iterable[str]) -> bool:
    """Whether results named ``result_ids`` answer the calls named ``call_ids`` exactly: the
    calls' ids distinct, each answered once, and no result for any other id."""
    calls, results = sorted(call_ids), sorted(result_ids)
    return bool(calls) and len(set(calls)) == len(calls) and calls == results


def with_tool_parts(
    messages: Sequence[RequestMessage],
    blocks: Sequence[Sequence[str]],
    block_ids: Sequence[Sequence[Hashable | None]],
    turns: Mapping[Any, ToolTurn],
    breakpoints: tuple[tuple[int, int], ...] = (),
) -> tuple[list[RequestMessage], tuple[tuple[int, int], ...]]:
    """``messages`` (one per entry of ``blocks``, whose blocks render the messages named by
    ``block_ids``) with each whole tool round as parts; the cache ``breakpoints`` (message,
    block) moved to the last part of their block."""
    out = list(messages)
    if len(block_ids) != len(messages) or not turns:
        return out, breakpoints
    rounds: set[int] = set()  # messages whose last block is a round's calls
    for i in range(len(block_ids) - 1):
        calls = turns.get(block_ids[i][-1]) if block_ids[i] else None
        results = turns.get(block_ids[i + 1][0]) if block_ids[i + 1] else None
        if (
            calls is not None
            and results is not None
            and calls.calls
            and messages[i].role == "assistant"
            and messages[i + 1].role == "user"
            and answers_exactly(
                (c.id for c in calls.calls), (r.tool_use_id for r in results.results)
            )
        ):
            rounds.add(i)
    if not rounds:
        return out, breakpoints
    moved: dict[tuple[int, int], tuple[int, int]] = {}
    for i in sorted(rounds | {i + 1 for i in rounds}):
        parts: list[ContentPart] = []
        for k, (text, item) in enumerate(zip(blocks[i], block_ids[i], strict=True)):
            turn = turns.get(item)
            if i in rounds and k == len(blocks[i]) - 1 and turn is not None:
                parts += [TextPart(turn.text)] if turn.text.strip() else []
                parts += turn.calls
            elif i - 1 in rounds and k == 0 and turn is not None:
                parts += turn.results
            else:
                parts.append(TextPart(text))
            moved[(i, k)] = (i, len(parts) - 1)
        out[i] = RequestMessage(messages[i].role, parts)
    return out, tuple(moved.get(b, b) for b in breakpoints)
