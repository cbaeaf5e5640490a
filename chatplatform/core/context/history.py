"""The history walk: recent history taken newest to oldest, in whole units, without gaps.

A unit is one message, or every message between a tool call and its results (so a call and
its results are kept or dropped together; see :mod:`.units`). Tokens of a unit come from
stored counts where this counter made them; a text without one is counted only when the walk
reaches it. Which messages the walk may start from, and where a kept window restarts, is the
sliding window's (:mod:`.window`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from itertools import accumulate, repeat
from operator import add
from typing import Any, NamedTuple

from .formatting import CONVERSATION_START, TurnText, cut_framed, format_turn, frame_content
from .meter import Meter
from .types import Included, ItemId, MessageItem, Truncation
from .units import (
    AUTHOR,
    CONTENT,
    COUNTED_BY,
    EXCERPT,
    ID,
    ROLE,
    TOKENS,
    TOOL_GROUP,
    Taken,
    group_units,
    message_records,
    transpose,
)

#: The provider role of a history turn (tool results and any other role are user turns, as
#: in ``format_turn``).
_PROVIDER_ROLE = {"user": "user", "assistant": "assistant", "tool": "user"}


class _Columns(NamedTuple):
    """A plain history (one message per unit, each with a stored count made by the counter),
    measured at once: items newest first, their ids, roles and contents, the prefix of each
    turn (``None``: every prefix is empty) and the tokens accounted for each."""

    items: Sequence[MessageItem]
    ids: Sequence[ItemId]
    roles: Sequence[str]
    #: Every role is ``user`` or ``assistant``: the roles are the provider roles.
    conversational: bool
    contents: Sequence[str]
    prefixes: list[str] | None
    tokens: list[int]


class History:
    """The walk over the units of ``newest_first`` (newest first), taking whole units
    without gaps: a unit is one message, or every message between a tool call and its
    results. ``used`` includes overheads and, when the oldest taken turn is the assistant's,
    the synthetic first user turn (``start_cost``). ``count`` is the number of units taken.

    A unit costs the tokens of its turns' prefixes, its messages' contents and one
    per-message overhead each. Measuring takes two forms with the same results:

    * plain histories (no tool groups, every stored count made by this counter: the common
      case) are measured at once, in C-level passes over columns, with prefixes formatted
      once per distinct role, quoted excerpt and (multi-user) author; nothing needs
      tokenizing, so measuring what the walk will not reach costs next to nothing; turns
      and records are built for what is taken only, when asked for;
    * other histories (tool groups, legacy or foreign counts) are measured unit by unit,
      only as the walk reaches them, so a unit the walk never reaches is never counted nor
      reported as recounted.
    """

    def __init__(
        self,
        newest_first: Sequence[MessageItem],
        meter: Meter,
        multi_user: bool,
        columns: list[tuple[Any, ...]] | None = None,
    ) -> None:
        """``columns``: ``transpose(newest_first)`` when the caller already has it."""
        self.meter = meter
        self.multi_user = multi_user
        self.count = 0
        self.start_cost = meter.small(CONVERSATION_START) + meter.overhead
        #: Tokens of the taken units (kept as the walk goes).
        self._body = 0
        #: Per-unit measures of the units measured one by one (walk order).
        self._built: list[Taken] = []
        #: The newest unit cut to fit (``truncate_newest``), which then stands for unit 0.
        self._cut: Taken | None = None
        self._plain = self._measure_plain(newest_first, columns)
        #: Units of a history measured one by one (empty for a plain one).
        self._units: list[Sequence[MessageItem]] = (
            [] if self._plain is not None else group_units(newest_first)
        )

    @property
    def units(self) -> list[Sequence[MessageItem]]:
        """The units, newest first (each chronological)."""
        if self._plain is not None:
            return list(zip(self._plain.items))
        return self._units

    @property
    def tool_groups(self) -> bool:
        """Whether any message of the history belongs to a tool group."""
        return self._plain is None and any(
            m.tool_group is not None for unit in self._units for m in unit
        )

    @property
    def size(self) -> int:
        """The number of units."""
        return len(self._plain.items) if self._plain is not None else len(self._units)

    # -- measuring ---------------------------------------------------------------------

    def _measure_plain(
        self, items: Sequence[MessageItem], columns: list[tuple[Any, ...]] | None
    ) -> _Columns | None:
        """The columns of a plain history, or ``None`` when it is not one."""
        meter = self.meter
        if columns is None:
            columns = transpose(items)
        groups = columns[TOOL_GROUP]
        if groups.count(None) != len(groups):
            return None  # tool groups: units of several messages
        tokens = columns[TOKENS]
        try:
            if tokens and min(tokens) < 0:
                return None
        except TypeError:
            return None  # legacy rows (no count): counted as the walk reaches them
        counted = columns[COUNTED_BY]
        if counted.count(None) + counted.count(meter.counter.name) != len(counted):
            return None  # counted by another counter: recounted (and reported)
        ids, roles, contents = columns[ID], columns[ROLE], columns[CONTENT]
        excerpts = columns[EXCERPT]
        overhead = meter.overhead
        conversational = roles.count("user") + roles.count("assistant") == len(roles)
        prefixes: list[str] | None
        extras: Iterable[int]
        if not self.multi_user and conversational and not any(excerpts):
            # Every prefix is empty (private chats, as a rule).
            prefixes, extras = None, repeat(meter.small("") + overhead)
        else:
            # The prefix depends on the role, the quoted excerpt and (multi-user) the author.
            keys: list[tuple[Any, ...]] = (
                list(zip(roles, excerpts, columns[AUTHOR], strict=True))
                if self.multi_user
                else list(zip(roles, excerpts, strict=True))
            )
            # One item per distinct key (built in C), formatted once each.
            representative = dict(zip(keys, items, strict=True))
            prefix_of = {
                key: format_turn(m, self.multi_user).prefix for key, m in representative.items()
            }
            extra_of = {key: meter.small(prefix) + overhead for key, prefix in prefix_of.items()}
            prefixes = list(map(prefix_of.__getitem__, keys))
            extras = map(extra_of.__getitem__, keys)
        counts = list(map(add, tokens, extras))
        framed = tuple(map(frame_content, contents))
        if framed != contents:  # element by element, as a rule the same strings
            # The prompt holds a framed content (rarely different): counted as it is sent.
            for i in [i for i, (a, b) in enumerate(zip(contents, framed, strict=True)) if a != b]:
                counts[i] += meter.text(framed[i]) - tokens[i]
        return _Columns(items, ids, roles, conversational, framed, prefixes, counts)

    def _measure(self, items: Sequence[MessageItem]) -> Taken:
        """One unit measured on its own (recounting what lacks a stored count by this
        counter, recorded by the meter)."""
        meter, overhead = self.meter, self.meter.overhead
        turns = [format_turn(m, self.multi_user) for m in items]
        per = [
            meter.small(t.prefix)
            + (
                meter.stored("message", m.id, m.content, m.tokens, m.counted_by)
                if t.content == m.content
                else meter.text(t.content)  # framed: counted as it is sent
            )
            + overhead
            for m, t in zip(items, turns, strict=True)
        ]
        records = [Included("message", m.id, n) for m, n in zip(items, per, strict=True)]
        return Taken(items, turns, sum(per), per, records)

    def _tokens_at(self, k: int) -> int:
        """Tokens of unit ``k`` (measured now if it is the next one, in the per-unit form)."""
        if self._plain is not None:
            return self._plain.tokens[k]
        built = self._built
        if len(built) == k:
            built.append(self._measure(self._units[k]))
        return built[k].tokens

    def _unit(self, k: int) -> Taken:
        """Unit ``k`` (already measured) as a :class:`Taken`."""
        if k == 0 and self._cut is not None:
            return self._cut
        plain = self._plain
        if plain is None:
            return self._built[k]
        m = plain.items[k]
        n = plain.tokens[k]
        prefix = "" if plain.prefixes is None else plain.prefixes[k]
        turn = TurnText(_PROVIDER_ROLE.get(m.role, "user"), prefix, m.content)
        return Taken((m,), (turn,), n, (n,), (Included("message", m.id, n),))

    def _assistant_first(self, k: int) -> bool:
        # A unit's turns are chronological and a turn is the assistant's exactly when its
        # message is (``format_turn``).
        if self._plain is not None:
            return self._plain.roles[k] == "assistant"
        return self._units[k][0].role == "assistant"

    # -- the walk ----------------------------------------------------------------------

    @property
    def body(self) -> int:
        return self._body

    def _start(self, k: int | None) -> int:
        """The start cost when unit ``k`` (the oldest taken) is the assistant's."""
        return self.start_cost if k is not None and self._assistant_first(k) else 0

    @property
    def used(self) -> int:
        return self._body + self._start(self.count - 1 if self.count else None)

    @property
    def messages(self) -> int:
        if self._plain is not None:
            return self.count
        return sum(map(len, self._units[: self.count]))

    def extend(self, room: int, max_messages: int | None = None) -> None:
        """Take older units while the total stays ``<= room`` (and, if given, until
        ``max_messages`` messages are taken). Stops at the first unit that does not fit."""
        if self._cut is not None:
            return  # the newest unit was cut: nothing older can fit
        if self._plain is not None:
            # One unit per message: the message limit is a unit limit.
            stop = len(self._plain.items)
            if max_messages is not None:
                stop = min(stop, max(self.count, max_messages))
            self._take_plain(room, stop)
            return
        units, messages = self._units, self.messages
        while self.count < len(units):
            k = self.count
            if max_messages is not None and messages >= max_messages:
                return
            tokens = self._tokens_at(k)
            if self._body + tokens + self._start(k) > room:
                return
            self.count += 1
            self._body += tokens
            messages += len(units[k])

    def _take_plain(self, room: int, stop: int) -> None:
        """Take units ``count..stop-1`` while the total stays ``<= room``: the one-at-a-time
        rule, found by bisection. The running totals only grow; a unit fits when its total
        plus its start cost (charged when it is the assistant's) is within ``room``, so only
        the units between the two bisection points need a look at their role."""
        plain = self._plain
        k = self.count
        if plain is None or k >= stop:
            return
        totals = list(accumulate(plain.tokens[k:stop], initial=self._body))
        del totals[0]
        fits_any = bisect_right(totals, room - self.start_cost)
        fits_none = bisect_right(totals, room)
        roles = plain.roles
        taken = next(
            (i for i in range(fits_any, fits_none) if roles[k + i] == "assistant"), fits_none
        )
        if taken:
            self.count = k + taken
            self._body = totals[taken - 1]

    def would_fit(self, room: int) -> int:
        """How many untaken messages the walk would still take within ``room`` (the total,
        as ``extend`` counts it), without taking them: those a trim mark left out although
        the room had space for them. Measures at most what fits, as the walk would."""
        if self._cut is not None:
            return 0
        body, k, messages = self._body, self.count, 0
        while k < self.size:
            tokens = self._tokens_at(k)
            if body + tokens + self._start(k) > room:
                break
            body += tokens
            messages += 1 if self._plain is not None else len(self._units[k])
            k += 1
        return messages

    def truncate_newest(self, room: int, min_tokens: int) -> Truncation | None:
        """When nothing fits, cut the newest unit (a single message) to the room, head and
        tail kept. Returns the truncation record, or None when nothing was cut."""
        if self.count or not self.size:
            return None
        if self._plain is None and len(self._units[0]) != 1:
            return None
        self._tokens_at(0)
        unit = self._unit(0)
        item, turn = unit.items[0], unit.turns[0]
        prefix = self.meter.small(turn.prefix)
        fixed = prefix + self.meter.overhead + self._start(0) + 1
        if room - fixed < min_tokens:
            return None
        original = unit.tokens - prefix - self.meter.overhead
        known = original if turn.content == item.content else None
        cut = cut_framed(item.content, room - fixed, self.meter.counter, known)
        new_turn = TurnText(turn.role, turn.prefix, cut.text)
        tokens = prefix + cut.tokens + self.meter.overhead + 1
        record = Included("message", item.id, tokens)
        self._cut = Taken(unit.items, [new_turn], tokens, [tokens], [record])
        self.count, self._body = 1, tokens
        return Truncation("message", item.id, original, cut.tokens)

    def reset(self) -> None:
        """Take nothing again (the walk restarts from the newest unit)."""
        self.count, self._body, self._cut = 0, 0, None

    def newest_units(self) -> Iterable[Sequence[MessageItem]]:
        """The units, newest first (each chronological), made one at a time as they are read
        (a reader that stops early builds nothing past where it stopped)."""
        if self._plain is not None:
            return zip(self._plain.items)
        return self._units

    def drop_oldest(self, tokens: int) -> list[Taken]:
        """Drop oldest taken units until at least ``tokens`` are freed (at least one), judged
        by a fresh count of their rendered turns (stored counts may be wrong)."""
        dropped: list[Taken] = []
        freed = 0
        while self.count and (freed < tokens or not dropped):
            unit = self._unit(self.count - 1)
            self.count -= 1
            self._body -= unit.tokens
            dropped.append(unit)
            real = sum(self.meter.text(t.text) + self.meter.overhead for t in unit.turns)
            freed += max(unit.tokens, real)
        return dropped

    # -- what was taken ----------------------------------------------------------------

    def untaken(self) -> list[MessageItem]:
        """The messages of the units not taken, newest unit first."""
        if self._plain is not None:
            return list(self._plain.items[self.count :])
        return [m for unit in self._units[self.count :] for m in unit]

    def roles_and_texts(self) -> tuple[list[str], list[str]]:
        """The provider role and the text of each taken turn, chronological."""
        count = self.count
        if not count:
            return [], []
        plain = self._plain
        if plain is not None and self._cut is None:
            roles = list(plain.roles[count - 1 :: -1])
            if not plain.conversational:
                # Tool results (and any other role) are user turns, as in ``format_turn``.
                roles = list(map(_PROVIDER_ROLE.get, roles, repeat("user")))
            contents = plain.contents[count - 1 :: -1]
            if plain.prefixes is None:
                return roles, list(contents)
            return roles, list(map(add, plain.prefixes[count - 1 :: -1], contents))
        turns = self.turns()
        return [t.role for t in turns], [t.text for t in turns]

    def turns(self) -> list[TurnText]:
        """Taken turns in chronological order."""
        return [t for k in range(self.count - 1, -1, -1) for t in self._unit(k).turns]

    def included(self) -> list[Included]:
        """Taken messages in chronological order, with the tokens accounted for each."""
        count = self.count
        plain = self._plain
        if not count:
            return []
        if plain is not None and self._cut is None:
            return message_records(plain.ids[count - 1 :: -1], plain.tokens[count - 1 :: -1])
        return [record for k in range(count - 1, -1, -1) for record in self._unit(k).records]

    def oldest_seq(self) -> int | None:
        """The seq of the oldest taken message, or ``None`` when nothing was taken."""
        if not self.count:
            return None
        if self._cut is not None:
            return int(self._cut.items[0].seq)
        if self._plain is not None:
            return int(self._plain.items[self.count - 1].seq)
        return int(self._units[self.count - 1][0].seq)

    def ids(self) -> set[ItemId]:
        if self._plain is not None:
            return set(self._plain.ids[: self.count])
        return {m.id for unit in self._units[: self.count] for m in unit}
