"""The context meter: how one turn's window was split, what was left out and why, and what
it cost against sending the whole history with prompt caching (the bill first, tokens
second, in :mod:`chatplatform.core.llm.cost_comparison`'s words). Built from the stored
per-turn record."""

from __future__ import annotations

from typing import Any

from chatplatform.core.context.strategies import strategy_for
from chatplatform.core.llm.context_report import exclusion_label
from chatplatform.models.conversations import TurnRecord
from chats.assembly.records import turn_cost_comparison

#: Prompt sections in the order the meter draws them (the prompt's order: the user's standing
#: instructions and preferences before their facts); the new message and the provider's
#: framing are shown as part of the history segment's neighbours.
SEGMENTS = (
    ("system", "System prompt"),
    ("instructions", "Instructions"),
    ("facts", "Facts"),
    ("summaries", "Summaries"),
    ("retrieval", "Retrieved"),
    ("history", "History"),
    ("new_message", "New message"),
    ("framing", "Framing"),
)


def meter_payload(record: TurnRecord) -> dict[str, Any]:
    """JSON-ready meter of one stored turn."""
    stored = record.sections if isinstance(record.sections, dict) else {}
    reserve = record.policy.reserved_response_tokens if record.policy is not None else 0
    meter = split_of_window(
        sections=stored.get("sections", []),
        excluded=record.excluded,
        truncated=stored.get("truncated", []),
        budget=record.budget_tokens,
        reserve=reserve,
        # Savings compare counts of the same counter: the estimate, not the provider's.
        prompt_tokens=record.prompt_tokens_estimated,
        hypothetical=int(record.hypothetical_tokens),
    )
    meter.update(
        turn={
            "user_message_id": record.user_message_id,
            "assistant_message_id": record.assistant_message_id,
            "created_at": record.created_at.isoformat(),
        },
        strategy=record.strategy,
        dense_retrieval=stored.get("dense_retrieval", "off"),
        widened_by=int(stored.get("widened_by") or 0),
        counter=record.counter,
        model=record.model_profile.name if record.model_profile is not None else "",
        policy=record.policy.name if record.policy is not None else "",
        prompt_tokens_estimated=record.prompt_tokens_estimated,
        prompt_tokens_reported=record.prompt_tokens_reported,
        completion_tokens=record.completion_tokens,
        cache_read_tokens=record.cache_read_tokens,
        cache_write_tokens=record.cache_write_tokens,
        cost_usd=str(record.cost_usd),
        full_history_cost_usd=str(record.full_history_cost_usd),
        cache_read_percent=_percent(
            record.cache_read_tokens, int(record.prompt_tokens_reported or 0)
        ),
        cost=turn_cost_comparison(record).as_dict(),
        provider_context=provider_context_lines(record.provider_context),
    )
    summaries_label = strategy_for(record.strategy).summaries_label
    if summaries_label is not None:
        for segment in meter["segments"]:
            if segment["name"] == "summaries":
                segment["label"] = summaries_label
    return meter


def provider_context_lines(recorded: Any) -> list[str]:
    """What the provider's own context management did this turn, in sentences."""
    if not isinstance(recorded, dict):
        return []
    lines: list[str] = []
    compaction = recorded.get("compaction")
    if isinstance(compaction, dict):
        usage = compaction.get("usage") or {}
        lines.append(
            f"The provider compacted messages #{compaction.get('first_seq')} to "
            f"#{compaction.get('last_seq')} into a {compaction.get('tokens', 0):,}-token summary "
            f"(its own work: {usage.get('input_tokens', 0):,} tokens read, "
            f"{usage.get('output_tokens', 0):,} written, ${compaction.get('cost_usd', '0')}, "
            "included in the bill); later turns send it instead of those messages."
        )
    for edit in recorded.get("applied_edits") or ():
        what = (
            f"{edit.get('cleared_tool_uses', 0)} old tool use(s)"
            if "cleared_tool_uses" in edit
            else f"the thinking of {edit.get('cleared_thinking_turns', 0)} turn(s)"
        )
        lines.append(
            f"The provider cleared {what} from the prompt "
            f"({edit.get('cleared_input_tokens', 0):,} tokens)."
        )
    return lines


def meter_from_breakdown(data: dict[str, Any]) -> dict[str, Any]:
    """The same meter from an unsaved breakdown (``chats.assembly.records.breakdown`` or
    ``preview_next_turn``), for previews."""
    meter = split_of_window(
        sections=data.get("sections", []),
        excluded=data.get("excluded", []),
        truncated=data.get("truncated", []),
        budget=int(data.get("budget") or 0),
        reserve=int(data.get("reserved_response_tokens") or 0),
        prompt_tokens=int(data.get("prompt_tokens") or 0),
        hypothetical=int(data.get("hypothetical_tokens") or 0),
    )
    meter.update(
        strategy=data.get("strategy", ""),
        dense_retrieval=data.get("dense_retrieval", "off"),
        counter=data.get("counter", ""),
        policy=(data.get("policy") or {}).get("name", ""),
    )
    return meter


def split_of_window(
    *,
    sections: Any,
    excluded: Any,
    truncated: Any,
    budget: int,
    reserve: int,
    prompt_tokens: int,
    hypothetical: int,
) -> dict[str, Any]:
    """Segments of the window (with their share of it, in percent), what was left out and
    why, and the tokens saved against sending the whole history."""
    by_name = {s.get("name"): s for s in sections if isinstance(s, dict)}
    window = budget + reserve
    segments: list[dict[str, Any]] = []
    for name, label in SEGMENTS:
        section = by_name.get(name)
        if section is None:
            continue
        tokens = int(section.get("used") or 0)
        segments.append(
            {
                "name": name,
                "label": label,
                "tokens": tokens,
                "budget": int(section.get("budget") or 0),
                "items": int(section.get("items") or 0),
                "percent": _percent(tokens, window),
            }
        )
    free = max(0, budget - sum(s["tokens"] for s in segments))
    saved = max(0, hypothetical - prompt_tokens)
    return {
        "budget_tokens": budget,
        "reply_reserve_tokens": reserve,
        "window_tokens": window,
        "segments": segments,
        "free_tokens": free,
        "free_percent": _percent(free, window),
        "reserve_percent": _percent(reserve, window),
        "excluded": _excluded(excluded),
        "truncated": _truncated(truncated),
        "prompt_tokens": prompt_tokens,
        "hypothetical_tokens": hypothetical,
        "saved_tokens": saved,
        "saved_percent": _percent(saved, hypothetical),
    }


def _percent(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 1) if whole else 0.0


def _truncated(rows: Any) -> list[dict[str, Any]]:
    """What was cut to fit, one entry per item; the recalled replies shown as their head
    (``excerpt``) as one entry with their number, however many there are."""
    out: list[dict[str, Any]] = []
    replies = {"kind": "", "id": None, "original_tokens": 0, "kept_tokens": 0}
    count = 0
    for t in rows if isinstance(rows, list) else []:
        if not isinstance(t, list | tuple) or len(t) < 4:
            continue
        if t[0] == "excerpt":
            count += 1
            replies["original_tokens"] += t[2]
            replies["kept_tokens"] += t[3]
            continue
        out.append({"kind": t[0], "id": t[1], "original_tokens": t[2], "kept_tokens": t[3]})
    if count:
        replies["kind"] = f"{count} recalled {'reply' if count == 1 else 'replies'}"
        out.append(replies)
    return out


def _excluded(rows: Any) -> list[dict[str, Any]]:
    """Left-out items grouped by reason: how many of each kind, and their known tokens."""
    groups: dict[str, dict[str, Any]] = {}
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, list | tuple) or len(row) < 4:
            continue
        kind, _id, tokens, reason = row[0], row[1], row[2], str(row[3])
        group = groups.setdefault(
            reason,
            {
                "reason": reason,
                "label": exclusion_label(reason),
                "count": 0,
                "tokens": 0,
                "kinds": {},
            },
        )
        group["count"] += 1
        group["tokens"] += int(tokens or 0)
        group["kinds"][kind] = group["kinds"].get(kind, 0) + 1
    return sorted(groups.values(), key=lambda g: -g["count"])
