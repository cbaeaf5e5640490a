"""Recent history: candidates, tool-group units, the newest-to-oldest walk, provider turns.

History is taken as whole *units*, newest first and without gaps: a unit is one message, or
every message between a tool call and its results (so a call and its results are kept or
dropped together). Tokens of a unit are counted only when the walk reaches it, from stored
counts where they were made by this counter.
"""

from __future__ import annotations

import threading
import weakref
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, NamedTuple

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
#: Characters of message contents whose measured units are remembered, per counter, chat
#: kind and overhead (the turns share the content strings with the messages they hold).
UNIT_MEMO_MAX_CHARS = 4_000_000


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
        texts = list(texts)
        total = 0
        missing: list[str] = []
        with self._lock:
            counts = self._counts
            # All remembered (every turn but the first of a conversation in this process):
            # look up and refresh in C-level passes rather than one Python step per text.
            found = list(map(counts.get, texts))
            if None not in found:
                for _ in map(counts.move_to_end, texts):
                    pass
                return sum(found), missing  # type: ignore[arg-type]  # no None in found
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


class UnitMemo:
    """Measured one-message units (:class:`Taken`) made in this process under one counter,
    for one chat kind (``multi_user``) and per-message overhead, keyed by the message item;
    cleared when the remembered contents pass ``max_chars``. Thread-safe.

    Why: consecutive turns of a conversation walk almost the same messages, and measuring a
    unit (formatting its turn, building its records) is most of the per-message work of a
    turn; a hit costs one hash of the item. Only units whose stored count this counter
    made are remembered: a measurement is then a pure function of the item (the prefix
    counts come from the same counter), and a recount, which must be reported, is never
    skipped.
    """

    def __init__(self, max_chars: int = UNIT_MEMO_MAX_CHARS) -> None:
        self.max_chars = max_chars
        self._units: dict[MessageItem, Taken] = {}
        self._chars = 0
        self._lock = threading.Lock()
        #: One atomic dict read (no lock needed), bound once: the walk calls it per message.
        self.get: Callable[[MessageItem], Taken | None] = self._units.get

    def put(self, item: MessageItem, unit: Taken) -> None:
        chars = len(item.content)
        if chars > MEMO_MAX_TEXT_CHARS:
            return
        with self._lock:
            if self._chars + chars > self.max_chars:
                # Dropping everything is cheaper than LRU bookkeeping on every hit; the next
                # turns refill what they use.
                self._units.clear()
                self._chars = 0
            self._units[item] = unit
            self._chars += chars


_unit_memos: weakref.WeakKeyDictionary[TokenCounter, dict[tuple[bool, int], UnitMemo]] = (
    weakref.WeakKeyDictionary()
)


def unit_memo(counter: TokenCounter, multi_user: bool, overhead: int) -> UnitMemo:
    """The process-wide unit memo of ``counter`` (one per counter object) for one chat kind
    and per-message overhead."""
    shape = (multi_user, overhead)
    memo = _unit_memos.get(counter, {}).get(shape)
    if memo is None:
        with _memos_lock:
            shapes = _unit_memos.setdefault(counter, {})
            memo = shapes.get(shape)
            if memo is None:
                memo = shapes[shape] = UnitMemo()
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
    if all(m.tool_group is None for m in messages):  # the common case: no tool groups
        return list(messages)
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


def group_units(newest_first: Sequence[MessageItem]) -> list[Sequence[MessageItem]]:
    """Split into units (newest first); each unit's messages are chronological. A unit spans
    from a group's newest to its oldest message, with whatever lies between."""
    oldest_at: dict[str, int] = {}
    for i, m in enumerate(newest_first):
        if m.tool_group is not None:
            oldest_at[m.tool_group] = i
    if not oldest_at:  # no tool groups (the common case): one message per unit
        return list(zip(newest_first))  # 1-tuples, built in C
    units: list[Sequence[MessageItem]] = []
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


class Taken(NamedTuple):
    """A unit in the prompt: its messages (chronological), their rendered turns, the tokens
    accounted for the unit and for each of its messages (``per_item``, same order).

    A named tuple: the walk needs one per history message on every turn."""

    items: Sequence[MessageItem]
    turns: Sequence[TurnText]
    tokens: int
    per_item: Sequence[int]
    #: ``Included`` records of the messages (same order), built once with the unit.
    records: Sequence[Included]

    @property
    def first_role(self) -> str:
        return self.turns[0].role


_tokens_of = attrgetter("tokens")
_first_of = itemgetter(0)
_items_of = attrgetter("items")


class History:
    """The walk over units, newest first. ``used`` includes overheads and, when the oldest
    taken turn is the assistant's, the synthetic first user turn."""

    def __init__(self, units: list[Sequence[MessageItem]], meter: Meter, multi_user: bool) -> None:
        self.units = units
        self.meter = meter
        self.multi_user = multi_user
        self.taken: list[Taken] = []
        #: Units measured so far, in walk order (the walk only ever asks for the next one,
        #: so a unit it never reaches is never counted nor reported as recounted).
        self._built: list[Taken] = []
        self.start_cost = meter.small(CONVERSATION_START) + meter.overhead
        self._name = meter.counter.name
        #: Every unit is one message (no tool groups), so a unit's first message is the unit.
        self._all_single = sum(map(len, units)) == len(units)
        self._memo = unit_memo(meter.counter, multi_user, meter.overhead)
        self._remembered = self._memo.get

    def _unit(self, k: int) -> Taken:
        """Unit ``k`` measured (units are measured in walk order, once)."""
        built = self._built
        while len(built) <= k:
            built.append(self._measure(self.units[len(built)]))
        return built[k]

    def _measure(self, items: Sequence[MessageItem]) -> Taken:
        meter, overhead, multi_user = self.meter, self.meter.overhead, self.multi_user
        if len(items) == 1:  # the common case, without the per-unit list machinery
            m = items[0]
            tokens = m.tokens
            counted_by = m.counted_by
            if (
                tokens is not None
                and tokens >= 0
                and (counted_by is None or counted_by == self._name)
            ):
                unit = self._remembered(m)
                if unit is None:
                    turn = format_turn(m, multi_user)
                    n = meter.small(turn.prefix) + tokens + overhead
                    unit = Taken((m,), (turn,), n, (n,), (Included("message", m.id, n),))
                    self._memo.put(m, unit)
                return unit
        turns = [format_turn(m, multi_user) for m in items]
        per = [
            meter.small(t.prefix)
            + meter.stored("message", m.id, m.content, m.tokens, m.counted_by)
            + overhead
            for m, t in zip(items, turns, strict=True)
        ]
        records = [Included("message", m.id, n) for m, n in zip(items, per, strict=True)]
        return Taken(items, turns, sum(per), per, records)

    def _recall(self) -> None:
        """Append to the measured units the next ones an earlier turn already measured (memo
        hits, up to the first miss) in one pass: cheaper than one lookup per walk step.
        Looking up units the walk will not reach is harmless (lookups have no effects)."""
        built, remembered = self._built, self._remembered
        rest = self.units[len(built) :]
        if self._all_single:  # the common case: C-level passes
            hits = list(map(remembered, map(_first_of, rest)))
        else:
            hits = [remembered(unit[0]) if len(unit) == 1 else None for unit in rest]
        if None in hits:
            del hits[hits.index(None) :]
        built += hits  # type: ignore[arg-type]  # the misses are cut off

    @property
    def body(self) -> int:
        return sum(map(_tokens_of, self.taken))

    def _start(self, oldest: Taken | None) -> int:
        return self.start_cost if oldest is not None and oldest.first_role == "assistant" else 0

    @property
    def used(self) -> int:
        return self.body + self._start(self.taken[-1] if self.taken else None)

    @property
    def messages(self) -> int:
        return sum(map(len, map(_items_of, self.taken)))

    def extend(self, room: int, max_messages: int | None = None) -> None:
        """Take older units while the total stays ``<= room`` (and, if given, until
        ``max_messages`` messages are taken). Stops at the first unit that does not fit.
        Units are measured only as the walk reaches them."""
        taken, units, built = self.taken, self.units, self._built
        if max_messages is None:
            while len(taken) < len(units):
                if len(taken) == len(built):
                    self._measure_next()
                if not self._take_measured(room):
                    return
            return
        body, messages, start_cost = self.body, self.messages, self.start_cost
        while len(taken) < len(units) and messages < max_messages:
            if len(taken) == len(built):
                self._measure_next()
            unit = built[len(taken)]
            start = start_cost if unit.turns[0].role == "assistant" else 0
            if body + unit.tokens + start > room:
                return
            taken.append(unit)
            body += unit.tokens
            messages += len(unit.items)

    def _measure_next(self) -> None:
        """Measure the next unit: recalled with the ones after it when an earlier turn
        measured them, else measured afresh (one, as the walk only needs the next)."""
        self._recall()
        if len(self._built) == len(self.taken):
            self._built.append(self._measure(self.units[len(self._built)]))

    def _take_measured(self, room: int) -> bool:
        """Take the measured, not yet taken units while the total stays ``<= room``; True
        when all of them fit (the walk goes on), False when one did not (the walk ends).

        The same rule as one unit at a time, found by bisection instead: the running totals
        only grow, a unit fits when its total plus its start cost (the synthetic first user
        turn, charged when the unit starts with the assistant) is within ``room``, so only
        the units between the two bisection points need a look at their first role."""
        taken, built = self.taken, self._built
        k = len(taken)
        totals = list(accumulate(map(_tokens_of, built[k:]), initial=self.body))
        del totals[0]
        fits_any = bisect_right(totals, room - self.start_cost)
        fits_none = bisect_right(totals, room)
        stop = next(
            (i for i in range(fits_any, fits_none) if built[k + i].turns[0].role == "assistant"),
            fits_none,
        )
        taken += built[k : k + stop]
        return stop == len(totals)

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
        record = Included("message", item.id, tokens)
        self.taken.append(Taken(unit.items, [new_turn], tokens, [tokens], [record]))
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
        """Taken messages in chronological order, with the tokens accounted for each."""
        return [record for unit in reversed(self.taken) for record in unit.records]

    def ids(self) -> set[ItemId]:
        return {m.id for unit in self.taken for m in unit.items}


def provider_messages(turns: list[TurnText]) -> list[dict[str, str]]:
    """Alternating turns for the provider: consecutive same-role turns are merged with a
    blank line; a conversation starting with the assistant gets a synthetic first user turn."""
    out: list[dict[str, str]] = []
    if turns and turns[0].role != "user":
        out.append({"role": "user", "content": CONVERSATION_START})
    last: dict[str, str] | None = out[-1] if out else None
    for role, prefix, content in turns:
        text = prefix + content if prefix else content
        if last is not None and last["role"] == role:
            last["content"] += TURN_SEPARATOR + text
        else:
            last = {"role": role, "content": text}
            out.append(last)
    return out
