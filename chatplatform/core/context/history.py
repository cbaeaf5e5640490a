"""Recent history: candidates, tool-group units, the newest-to-oldest walk, provider turns.

History is taken as whole *units*, newest first and without gaps: a unit is one message, or
every message between a tool call and its results (so a call and its results are kept or
dropped together). Tokens of a unit come from stored counts where this counter made them;
a text without one is counted only when the walk reaches it.
"""

from __future__ import annotations

import threading
import weakref
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from itertools import accumulate, repeat, takewhile
from operator import add, attrgetter, eq
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from .formatting import CONVERSATION_START, TURN_SEPARATOR, TurnText, format_turn
from .truncate import count_text, truncate_middle
from .types import Excluded, Included, ItemId, MessageItem, Truncation

if TYPE_CHECKING:
    from chatplatform.core.tokens.base import TokenCounter


#: Texts longer than this are not remembered across assemblies (a pasted book would crowd out
#: whole conversations, and it is truncated each turn anyway).
MEMO_MAX_TEXT_CHARS = 100_000
#: Characters of text remembered per counter (about 8-32 MB of strings).
MEMO_MAX_TOTAL_CHARS = 8_000_000


class CountMemo:
    """Counts one counter made in this process, keyed by the exact text, bounded by total
    characters (at most ``max_chars``). Thread-safe.

    Why: consecutive turns of a conversation send almost the same history, and a WebSocket
    keeps a conversation in one process, so the final recount of a turn re-tokenizes texts
    the previous turn already tokenized. Only counts *made by the counter* are remembered;
    stored counts read from the database never are (they are claims: the final recount
    exists to catch the ones that lie).

    Two generations instead of a least-recently-used order: a hit in the young one costs a
    plain dict read (no bookkeeping per hit, hundreds per turn); when the young generation
    fills half the bound it becomes the old one (the previous old one is dropped), and a hit
    in the old generation moves the text back to the young one. So what the recent turns
    used survives, and what no turn asked for during a whole generation goes.
    """

    def __init__(self, max_chars: int = MEMO_MAX_TOTAL_CHARS) -> None:
        self.max_chars = max_chars
        self._young: dict[str, int] = {}
        self._old: dict[str, int] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, text: str) -> int | None:
        # Reads take no lock: a dict read is atomic, and a read racing a generation swap can
        # only miss (the caller then counts, which is always correct).
        n = self._young.get(text)
        if n is None:
            n = self._old.get(text)
            if n is not None:
                self.put(text, n)
        return n

    def get_many(self, texts: Iterable[str]) -> tuple[int, list[str]]:
        """The sum of the remembered counts among ``texts``, and the texts not remembered."""
        texts = list(texts)
        # All in the young generation (every turn but the first of a conversation in this
        # process, as a rule): one C-level pass.
        found = list(map(self._young.get, texts))
        if None not in found:
            return sum(found), []  # type: ignore[arg-type]  # no None in found
        total = 0
        missing: list[str] = []
        for text, n in zip(texts, found, strict=True):
            if n is None:
                n = self.get(text)
            if n is None:
                missing.append(text)
            else:
                total += n
        return total, missing

    def put(self, text: str, n: int) -> None:
        chars = len(text)
        if chars > MEMO_MAX_TEXT_CHARS:
            return
        with self._lock:
            if text in self._young:
                return
            if self._chars + chars > self.max_chars // 2:
                self._old, self._young, self._chars = self._young, {}, 0
            self._young[text] = n
            self._chars += chars

    def clear(self) -> None:
        with self._lock:
            self._young, self._old, self._chars = {}, {}, 0


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


_tool_group = attrgetter("tool_group")


def drop_incomplete_groups(
    messages: Sequence[MessageItem], excluded: list[Excluded], kind: str = "message"
) -> list[MessageItem]:
    """Messages whose tool group lacks its call (assistant) or its result (tool) are left out."""
    groups = list(map(_tool_group, messages))
    if groups.count(None) == len(groups):  # the common case: no tool groups
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
    groups = list(map(_tool_group, newest_first))
    if groups.count(None) == len(groups):  # no tool groups (the common case)
        return list(zip(newest_first))  # one message per unit: 1-tuples, built in C
    oldest_at: dict[str, int] = {}
    for i, group in enumerate(groups):
        if group is not None:
            oldest_at[group] = i
    units: list[Sequence[MessageItem]] = []
    i = 0
    while i < len(newest_first):
        end = j = i
        while j <= end:
            group = groups[j]
            if group is not None:
                end = max(end, oldest_at[group])
            j += 1
        units.append(list(reversed(newest_first[i : end + 1])))
        i = end + 1
    return units


class Taken(NamedTuple):
    """A unit in the prompt: its messages (chronological), their rendered turns, the tokens
    accounted for the unit and for each of its messages (``per_item``, same order)."""

    items: Sequence[MessageItem]
    turns: Sequence[TurnText]
    tokens: int
    per_item: Sequence[int]
    #: ``Included`` records of the messages (same order), built once with the unit.
    records: Sequence[Included]

    @property
    def first_role(self) -> str:
        return self.turns[0].role


#: Positions of :class:`MessageItem` fields: the columns of :func:`transpose`.
ID, SEQ, ROLE, CONTENT, AUTHOR, TOKENS, COUNTED_BY, CREATED_AT, EXCERPT, TOOL_GROUP = map(
    MessageItem._fields.index,
    (
        "id",
        "seq",
        "role",
        "content",
        "author",
        "tokens",
        "counted_by",
        "created_at",
        "reply_to_excerpt",
        "tool_group",
    ),
)


def transpose(items: Sequence[MessageItem]) -> list[tuple[Any, ...]]:
    """The columns of ``items``: one tuple per :class:`MessageItem` field (index them with
    ``ID``, ``SEQ``, ``ROLE``...), built in one C-level pass, where reading one field of
    every item is one pass each."""
    if not items:
        return [()] * len(MessageItem._fields)
    return list(zip(*items, strict=True))


#: The provider role of a history turn (tool results and any other role are user turns, as
#: in ``format_turn``).
_PROVIDER_ROLE = {"user": "user", "assistant": "assistant", "tool": "user"}
_new_included = cast(Callable[[Iterable[Any]], Included], partial(tuple.__new__, Included))


#: Distinct history records the record memo holds before it starts afresh.
RECORD_MEMO_MAX = 50_000
#: ``Included("message", id, tokens)`` records made in this process, by ``(id, tokens)``.
_record_memo: dict[tuple[ItemId, int], Included] = {}


def _records(ids: Sequence[ItemId], tokens: Sequence[int]) -> list[Included]:
    """``Included("message", id, n)`` for each id and count, the same objects as earlier
    turns made when they can be: consecutive turns record almost the same messages, and a
    looked-up record is no new object for the collector to scan. A record is a pure value
    of its key, so a remembered one is exactly what a new one would be."""
    memo = _record_memo
    found: list[Any] = list(map(memo.get, zip(ids, tokens, strict=True)))
    if all(found):  # records are non-empty tuples; a miss is None
        return found
    if len(memo) > RECORD_MEMO_MAX:
        memo.clear()  # cheaper than eviction bookkeeping; the next turns refill it
    for index, record in enumerate(found):
        if record is None:
            key = (ids[index], tokens[index])
            found[index] = memo[key] = _new_included(("message", *key))
    return found


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
        return _Columns(
            items, ids, roles, conversational, contents, prefixes, list(map(add, tokens, extras))
        )

    def _measure(self, items: Sequence[MessageItem]) -> Taken:
        """One unit measured on its own (recounting what lacks a stored count by this
        counter, recorded by the meter)."""
        meter, overhead = self.meter, self.meter.overhead
        turns = [format_turn(m, self.multi_user) for m in items]
        per = [
            meter.small(t.prefix)
            + meter.stored("message", m.id, m.content, m.tokens, m.counted_by)
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
        cut = truncate_middle(turn.content, room - fixed, self.meter.counter, total_tokens=original)
        new_turn = TurnText(turn.role, turn.prefix, cut.text)
        tokens = prefix + cut.tokens + self.meter.overhead + 1
        record = Included("message", item.id, tokens)
        self._cut = Taken(unit.items, [new_turn], tokens, [tokens], [record])
        self.count, self._body = 1, tokens
        return Truncation("message", item.id, original, cut.tokens)

    def reset(self) -> None:
        """Take nothing again (the walk restarts from the newest unit)."""
        self.count, self._body, self._cut = 0, 0, None

    def window_messages(self, start_seq: int | None) -> int | None:
        """How many of the newest messages have a seq of at least ``start_seq`` (the cached
        window), or ``None`` without a window or when it starts inside a unit."""
        if start_seq is None:
            return None
        if self._plain is not None:  # one message per unit, newest first
            return sum(1 for _ in takewhile(lambda m: m.seq >= start_seq, self._plain.items))
        n = 0
        for unit in self._units:
            if unit[-1].seq < start_seq:
                break
            if unit[0].seq < start_seq:
                return None
            n += len(unit)
        return n

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
            return _records(plain.ids[count - 1 :: -1], plain.tokens[count - 1 :: -1])
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


def turns_alternate(roles: Sequence[str]) -> bool:
    """Whether turns of these roles go to the provider as they are, one message each: they
    start with the user and no two neighbours share a role."""
    return bool(roles) and roles[0] == "user" and not any(map(eq, roles, roles[1:]))


def one_message_each(roles: Sequence[str], texts: Sequence[str]) -> list[dict[str, str]]:
    """Provider messages of turns that alternate (:func:`turns_alternate`)."""
    return [{"role": role, "content": text} for role, text in zip(roles, texts, strict=True)]


def provider_blocks(
    roles: Sequence[str], texts: Sequence[str]
) -> list[tuple[str, tuple[str, ...]]]:
    """Alternating provider messages, each as its role and its turns' texts (one content
    block per turn, so a prompt cache can end at any turn): consecutive same-role turns share
    a message; a conversation starting with the assistant gets a synthetic first user turn."""
    out: list[tuple[str, list[str]]] = []
    if roles and roles[0] != "user":
        out.append(("user", [CONVERSATION_START]))
    for role, text in zip(roles, texts, strict=True):
        if out and out[-1][0] == role:
            out[-1][1].append(text)
        else:
            out.append((role, [text]))
    return [(role, tuple(parts)) for role, parts in out]


def provider_messages(roles: Sequence[str], texts: Sequence[str]) -> list[dict[str, str]]:
    """:func:`provider_blocks` with each message's blocks joined into its content."""
    if turns_alternate(roles):  # as a rule: nothing to merge
        return one_message_each(roles, texts)
    return [
        {"role": role, "content": TURN_SEPARATOR.join(parts)}
        for role, parts in provider_blocks(roles, texts)
    ]
