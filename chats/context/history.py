"""Recent history: candidates, tool-group units, the newest-to-oldest walk, provider turns.

History is taken as whole *units*, newest first and without gaps: a unit is one message, or
every message between a tool call and its results (so a call and its results are kept or
dropped together). Tokens of a unit are counted only when the walk reaches it, from stored
counts where they were made by this counter.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .formatting import CONVERSATION_START, TURN_SEPARATOR, TurnText, format_turn
from .truncate import count_text, truncate_middle
from .types import Excluded, Included, ItemId, MessageItem, Truncation

if TYPE_CHECKING:
    from chatplatform.tokens.base import TokenCounter


#: Texts longer than this are not remembered across assemblies (a pasted book would crowd out
#: whole conversations, and it is truncated each turn anyway).
MEMO_MAX_TEXT_CHARS = 100_000
#: Characters of text remembered per counter (about 8-32 MB of strings).
MEMO_MAX_TOTAL_CHARS = 8_000_000


class CountMemo:
    """Counts one counter made in this process, keyed by the exact text, least recently used
    evicted first (bounded by total characters). Thread-safe.

    Why: consecutive turns of a conversation send almost the same history, and a WebSocket
    keeps a conversation in one process, so the final recount of a turn re-tokenizes texts
    the previous turn already tokenized. Only counts *made by the counter* are remembered;
    stored counts read from the database never are (they are claims: the final recount
    exists to catch the ones that lie).
    """

    def __init__(self, max_chars: int = MEMO_MAX_TOTAL_CHARS) -> None:
        self.max_chars = max_chars
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, text: str) -> int | None:
        with self._lock:
            n = self._counts.get(text)
            if n is not None:
                self._counts.move_to_end(text)
            return n

    def get_many(self, texts: Iterable[str]) -> tuple[int, list[str]]:
        """The sum of the remembered counts among ``texts``, and the texts not remembered."""
        total = 0
        missing: list[str] = []
        with self._lock:
            counts = self._counts
            for text in texts:
                n = counts.get(text)
                if n is None:
                    missing.append(text)
                else:
                    counts.move_to_end(text)
                    total += n
        return total, missing

    def put(self, text: str, n: int) -> None:
        if len(text) > MEMO_MAX_TEXT_CHARS:
            return
        with self._lock:
            if text in self._counts:
                return
            self._counts[text] = n
            self._chars += len(text)
            while self._chars > self.max_chars and self._counts:
                old, _ = self._counts.popitem(last=False)
                self._chars -= len(old)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()
            self._chars = 0


_memos: weakref.WeakKeyDictionary[TokenCounter, CountMemo] = weakref.WeakKeyDictionary()
_memos_lock = threading.Lock()


def count_memo(counter: TokenCounter) -> CountMemo:
    """The process-wide memo of ``counter`` (one per counter object: two objects with the
    same name, e.g. test doubles, never share counts)."""
    memo = _memos.get(counter)
    if memo is None:
        with _memos_lock:
            memo = _memos.get(counter)
            if memo is None:
                memo = _memos[counter] = CountMemo()
    return memo


class Meter:
    """Counts with one counter; trusts stored counts made by it and records the others.

    ``text`` tokenizes a text at most once per process (see :class:`CountMemo`), so the
    final recount of the prompt costs tokenization only for texts new since the previous
    turns.
    """

    def __init__(self, counter: TokenCounter, overhead: int) -> None:
        self.counter = counter
        self.overhead = overhead
        self.recounted: list[Included] = []
        self._small: dict[str, int] = {}
        self._memo = count_memo(counter)

    def text(self, text: str) -> int:
        known = self._memo.get(text)
        if known is not None:
            return known
        n = count_text(self.counter, text)
        self._memo.put(text, n)
        return n

    def texts(self, texts: Iterable[str]) -> int:
        """The sum of ``text`` over ``texts`` (one lock round for the memo hits)."""
        total, missing = self._memo.get_many(texts)
        for text in missing:
            total += self.text(text)
        return total

    def small(self, text: str) -> int:
        """Count of a short, often repeated string (prefixes, frames), cached."""
        n = self._small.get(text)
        if n is None:
            if len(self._small) > 4096:
                self._small.clear()
            n = self._small[text] = self.text(text)
        return n

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
    if not oldest_at:  # no tool groups (the common case): one message per unit
        return [[m] for m in newest_first]
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
        #: Units measured so far, in walk order (the walk only ever asks for the next one).
        self._built: list[Taken] = []
        self.start_cost = meter.small(CONVERSATION_START) + meter.overhead
        self._name = meter.counter.name

    def _unit(self, k: int) -> Taken:
        """Unit ``k`` measured (units are measured in walk order, once)."""
        built = self._built
        while len(built) <= k:
            built.append(self._measure(self.units[len(built)]))
        return built[k]

    def _measure(self, items: list[MessageItem]) -> Taken:
        meter, overhead, multi_user = self.meter, self.meter.overhead, self.multi_user
        if len(items) == 1:  # the common case, without the per-unit list machinery
            m = items[0]
            turn = format_turn(m, multi_user)
            tokens = m.tokens
            if tokens is None or tokens < 0 or m.counted_by not in (None, self._name):
                tokens = meter.stored("message", m.id, m.content, tokens, m.counted_by)
            n = meter.small(turn.prefix) + tokens + overhead
            return Taken(items, [turn], n, [n])
        turns = [format_turn(m, multi_user) for m in items]
        per = [
            meter.small(t.prefix)
            + meter.stored("message", m.id, m.content, m.tokens, m.counted_by)
            + overhead
            for m, t in zip(items, turns, strict=True)
        ]
        return Taken(items, turns, sum(per), per)

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
        taken, units, start_cost = self.taken, self.units, self.start_cost
        messages = self.messages if max_messages is not None else 0
        built, measure = self._built, self._measure
        while len(taken) < len(units):
            if max_messages is not None and messages >= max_messages:
                return
            k = len(taken)
            if k < len(built):
                unit = built[k]
            else:
                unit = measure(units[k])
                built.append(unit)
            start = start_cost if unit.turns[0].role == "assistant" else 0
            if body + unit.tokens + start > room:
                return
            taken.append(unit)
            body += unit.tokens
            messages += len(unit.items)

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

    def included(self) -> list[Included]:
        out: list[Included] = []
        append = out.append
        for unit in reversed(self.taken):
            if len(unit.items) == 1:
                append(Included("message", unit.items[0].id, unit.tokens))
            else:
                out.extend(
                    Included("message", m.id, n)
                    for m, n in zip(unit.items, unit.per_item, strict=True)
                )
        return out

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
