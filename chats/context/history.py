"""Recent history: candidates, tool-group units, the newest-to-oldest walk, provider turns.

History is taken as whole *units*, newest first and without gaps: a unit is one message, or
every message between a tool call and its results (so a call and its results are kept or
dropped together). Tokens of a unit are counted only when the walk reaches it, from stored
counts where they were made by this counter.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .formatting import CONVERSATION_START, TURN_SEPARATOR, TurnText, format_turn
from .truncate import count_text, truncate_middle
from .types import Excluded, Included, ItemId, MessageItem, Truncation

if TYPE_CHECKING:
    from chatplatform.tokens.base import TokenCounter


class Meter:
    """Counts with one counter; trusts stored counts made by it and records the others."""

    def __init__(self, counter: TokenCounter, overhead: int) -> None:
        self.counter = counter
        self.overhead = overhead
        self.recounted: list[Included] = []
        self._small: dict[str, int] = {}
        # Texts tokenized during this assembly: a text is tokenized at most once. Stored
        # counts are deliberately not entered here, so the final recount really recounts.
        self._known: dict[str, int] = {}

    def text(self, text: str) -> int:
        known = self._known.get(text)
        if known is not None:
            return known
        n = count_text(self.counter, text)
        if len(self._known) < 100_000:
            self._known[text] = n
        return n

    def small(self, text: str) -> int:
        """Count of a short, often repeated string (prefixes, frames), cached."""
        if text not in self._small:
            if len(self._small) > 4096:
                self._small.clear()
            self._small[text] = count_text(self.counter, text)
        return self._small[text]

    def stored(
        self, kind: str, item_id: ItemId, text: str, tokens: int | None, counted_by: str | None
    ) -> int:
        """The item's stored count if this counter made it, else a fresh (recorded) count."""
        if tokens is not None and tokens >= 0 and counted_by in (None, self.counter.name):
            return tokens
        n = self.text(text)
        self.recounted.append(Included(kind, item_id, n))
        return n


def drop_incomplete_groups(
    messages: Sequence[MessageItem], excluded: list[Excluded], kind: str = "message"
) -> list[MessageItem]:
    """Messages whose tool group lacks its call (assistant) or its result (tool) are left out."""
    roles: dict[str, set[str]] = {}
    for m in messages:
        if m.tool_group is not None:
            roles.setdefault(m.tool_group, set()).add(m.role)
    bad = {g for g, r in roles.items() if not {"assistant", "tool"} <= r}
    if not bad:
        return list(messages)
    for m in messages:
        if m.tool_group in bad:
            excluded.append(Excluded(kind, m.id, m.tokens, "incomplete_tool_group"))
    return [m for m in messages if m.tool_group not in bad]


def group_units(newest_first: Sequence[MessageItem]) -> list[list[MessageItem]]:
    """Split into units (newest first); each unit's messages are chronological. A unit spans
    from a group's newest to its oldest message, with whatever lies between."""
    oldest_at: dict[str, int] = {}
    for i, m in enumerate(newest_first):
        if m.tool_group is not None:
            oldest_at[m.tool_group] = i
    units: list[list[MessageItem]] = []
    i = 0
    while i < len(newest_first):
        end = j = i
        while j <= end:
            group = newest_first[j].tool_group
            if group is not None:
                end = max(end, oldest_at[group])
            j += 1
        units.append(list(reversed(newest_first[i : end + 1])))
        i = end + 1
    return units


@dataclass(slots=True)
class Taken:
    """A unit in the prompt: its messages, rendered turns and accounted tokens."""

    items: list[MessageItem]
    turns: list[TurnText]
    tokens: int
    per_item: list[int] = field(default_factory=list)

    @property
    def first_role(self) -> str:
        return self.turns[0].role


class History:
    """The walk over units, newest first. ``used`` includes overheads and, when the oldest
    taken turn is the assistant's, the synthetic first user turn."""

    def __init__(self, units: list[list[MessageItem]], meter: Meter, multi_user: bool) -> None:
        self.units = units
        self.meter = meter
        self.multi_user = multi_user
        self.taken: list[Taken] = []
        self._cache: dict[int, Taken] = {}
        self.start_cost = meter.small(CONVERSATION_START) + meter.overhead

    def _unit(self, k: int) -> Taken:
        if k not in self._cache:
            items = self.units[k]
            turns = [format_turn(m, self.multi_user) for m in items]
            per = [
                self.meter.small(t.prefix)
                + self.meter.stored("message", m.id, m.content, m.tokens, m.counted_by)
                + self.meter.overhead
                for m, t in zip(items, turns, strict=True)
            ]
            self._cache[k] = Taken(items, turns, sum(per), per)
        return self._cache[k]

    @property
    def body(self) -> int:
        return sum(t.tokens for t in self.taken)

    def _start(self, oldest: Taken | None) -> int:
        return self.start_cost if oldest is not None and oldest.first_role == "assistant" else 0

    @property
    def used(self) -> int:
        return self.body + self._start(self.taken[-1] if self.taken else None)

    @property
    def messages(self) -> int:
        return sum(len(t.items) for t in self.taken)

    def extend(self, room: int, max_messages: int | None = None) -> None:
        """Take older units while the total stays ``<= room`` (and, if given, until
        ``max_messages`` messages are taken). Stops at the first unit that does not fit."""
        body = self.body
        while len(self.taken) < len(self.units):
            if max_messages is not None and self.messages >= max_messages:
                return
            unit = self._unit(len(self.taken))
            if body + unit.tokens + self._start(unit) > room:
                return
            self.taken.append(unit)
            body += unit.tokens

    def truncate_newest(self, room: int, min_tokens: int) -> Truncation | None:
        """When nothing fits, cut the newest unit (a single message) to the room, head and
        tail kept. Returns the truncation record, or None when nothing was cut."""
        if self.taken or not self.units or len(self.units[0]) != 1:
            return None
        unit = self._unit(0)
        item, turn = unit.items[0], unit.turns[0]
        prefix = self.meter.small(turn.prefix)
        fixed = prefix + self.meter.overhead + self._start(unit) + 1
        if room - fixed < min_tokens:
            return None
        original = unit.tokens - prefix - self.meter.overhead
        cut = truncate_middle(turn.content, room - fixed, self.meter.counter, total_tokens=original)
        new_turn = TurnText(turn.role, turn.prefix, cut.text)
        tokens = prefix + cut.tokens + self.meter.overhead + 1
        self.taken.append(Taken(unit.items, [new_turn], tokens, [tokens]))
        return Truncation("message", item.id, original, cut.tokens)

    def drop_oldest(self, tokens: int) -> list[Taken]:
        """Drop oldest taken units until at least ``tokens`` are freed (at least one), judged
        by a fresh count of their rendered turns (stored counts may be wrong)."""
        dropped: list[Taken] = []
        freed = 0
        while self.taken and (freed < tokens or not dropped):
            unit = self.taken.pop()
            dropped.append(unit)
            real = sum(self.meter.text(t.text) + self.meter.overhead for t in unit.turns)
            freed += max(unit.tokens, real)
        return dropped

    def turns(self) -> list[TurnText]:
        """Taken turns in chronological order."""
        return [t for unit in reversed(self.taken) for t in unit.turns]

    def included(self) -> Iterable[Included]:
        for unit in reversed(self.taken):
            for m, n in zip(unit.items, unit.per_item, strict=True):
                yield Included("message", m.id, n)

    def ids(self) -> set[ItemId]:
        return {m.id for unit in self.taken for m in unit.items}


def provider_messages(turns: list[TurnText]) -> list[dict[str, str]]:
    """Alternating turns for the provider: consecutive same-role turns are merged with a
    blank line; a conversation starting with the assistant gets a synthetic first user turn."""
    out: list[dict[str, str]] = []
    if turns and turns[0].role != "user":
        out.append({"role": "user", "content": CONVERSATION_START})
    for turn in turns:
        if out and out[-1]["role"] == turn.role:
            out[-1]["content"] += TURN_SEPARATOR + turn.text
        else:
            out.append({"role": turn.role, "content": turn.text})
    return out
