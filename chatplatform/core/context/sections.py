"""Facts, summaries and retrieved messages: selection within a section cap, and rendering.

Each ``pick_*`` takes candidates in the caller's order, a cap in tokens and the meter, and
returns what fits: rendered blocks for the system prompt and the tokens accounted for them
(frame + items + one token per block separator). Accounting is conservative; the assembly
recounts the final output anyway.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from chatplatform.core.memory.kinds import memory_kind_for

from .formatting import (
    RETRIEVED_GAP,
    escape_block_text,
    fact_change_line,
    fact_changes_block,
    fact_line,
    facts_block,
    facts_frame,
    instruction_line,
    instructions_block,
    instructions_frame,
    one_line,
    retrieved_body,
    retrieved_frame,
    retrieved_line,
    retrieved_speaker,
    retrieved_stamp,
    summary_frame,
    turn_instructions_block,
    turn_instructions_frame,
)
from .meter import Meter
from .truncate import truncate_tail
from .types import (
    STABLE_SUMMARY_KINDS,
    Excluded,
    FactItem,
    Included,
    ItemId,
    MessageItem,
    RetrievedItem,
    SummaryItem,
    Truncation,
)
from .units import drop_incomplete_groups

SEPARATOR_TOKENS = 1  # "\n\n" between system blocks
_KIND_ORDER = {"rolling": 0, "recent": 1, "long": 2, "carried": 3}


@dataclass(slots=True)
class Picked:
    """A section's outcome: rendered system blocks and accounted tokens."""

    name: str
    budget: int
    blocks: list[str] = field(default_factory=list)
    stable_blocks: list[str] = field(default_factory=list)
    #: Blocks only this turn sends (after the new message, outside the cached prefix).
    turn_blocks: list[str] = field(default_factory=list)
    used: int = 0
    included: list[Included] = field(default_factory=list)


def _frame_cost(meter: Meter, frame: tuple[str, str]) -> int:
    return meter.small(frame[0]) + meter.small(frame[1]) + SEPARATOR_TOKENS


def pick_facts(
    facts: Sequence[FactItem],
    cap: int,
    max_facts: int,
    meter: Meter,
    excluded: list[Excluded],
    new_text: str = "",
) -> Picked:
    """Facts in the caller's (relevance) order, deduplicated by ``key`` or normalised text,
    at most ``max_facts``, each one bullet of the fenced ``<user_facts>`` block. Memories of
    another section (instructions) are left to their own pick.

    A fact whose value changed and that the new message (``new_text``) concerns (they share
    a word of its subject or values) is also told as a change, in a ``<fact_changes>``
    block only this turn sends, when it fits the rest of ``cap``: the cached block keeps
    only current values, so it does not change with the question."""
    out = Picked("facts", cap)
    frame = _frame_cost(meter, facts_frame())
    used, lines, seen = frame, list[str](), set[str]()
    for fact in facts:
        if memory_kind_for(fact.kind).section != "facts":
            continue
        key = fact.key or one_line(fact.text, 10_000).casefold()
        if key in seen:
            excluded.append(Excluded("fact", fact.id, fact.tokens, "duplicate"))
            continue
        if len(lines) >= max_facts:
            excluded.append(Excluded("fact", fact.id, fact.tokens, "cap"))
            continue
        line = fact_line(fact.text)
        if line == "- " + fact.text:
            n = meter.stored("fact", fact.id, fact.text, fact.tokens, fact.counted_by) + 1
        else:
            n = meter.text(line)
        n += 1  # the joining newline
        if used + n > cap:
            excluded.append(Excluded("fact", fact.id, n, "over_budget"))
            continue
        seen.add(key)
        lines.append(line)
        out.included.append(Included("fact", fact.id, n))
        used += n
    if lines:
        out.blocks.append(facts_block(lines))
        out.used = used
        changes = _changes(facts, out, new_text, cap - used, meter)
        if changes:
            out.turn_blocks.append(fact_changes_block(changes[0]))
            out.used += changes[1]
    return out


_WORDS = re.compile(r"\w{3,}")
#: Words too common to tie a message to a fact.
_COMMON_WORDS = """the and for are was were has have had with that this from your you what when
    where which who how does did can could would should will now not but all any its it's our out
    about into than then them they their there here lives user"""
_COMMON = frozenset(_COMMON_WORDS.split())


def _words(text: str) -> set[str]:
    return set(_WORDS.findall(text.casefold())) - _COMMON


def _touched(fact: FactItem, words: set[str]) -> bool:
    subject = (fact.key or "").replace("_", " ")
    return not words.isdisjoint(_words(f"{subject} {fact.text} {fact.previous or ''}"))


def _changes(
    facts: Sequence[FactItem], picked: Picked, new_text: str, room: int, meter: Meter
) -> tuple[list[str], int] | None:
    """The change lines of the picked facts the new message concerns and their tokens, when
    they fit ``room``."""
    chosen = {i.id for i in picked.included}
    words = _words(new_text)
    lines = [
        fact_change_line(f.key, f.text, f.previous, f.since)
        for f in facts
        if f.previous and f.id in chosen and _touched(f, words)
    ]
    if not lines:
        return None
    tokens = meter.text(fact_changes_block(lines)) + SEPARATOR_TOKENS
    return (lines, tokens) if tokens <= room else None


#: When the instructions section cannot hold all of the user's, a turn whose message
#: concerns some it left out sends them too, in up to 1/this of the section's room more
#: (:func:`pick_instructions`).
TURN_INSTRUCTIONS_SHARE = 3
#: At most this many of them go with one turn.
TURN_INSTRUCTIONS = 3


def pick_instructions(
    memories: Sequence[FactItem],
    cap: int,
    max_items: int,
    meter: Meter,
    excluded: list[Excluded],
    ranked: Sequence[ItemId] = (),
    room: int = 0,
) -> Picked:
    """The user's standing instructions and preferences (the memories whose kind goes to the
    ``instructions`` section) within ``cap`` and ``max_items``.

    The section, in the cached prefix: each a bullet of the fenced ``<user_instructions>``
    block in the user's own words, rendered oldest first (the order they were given in).
    They are taken by their kind's ``keep_order`` (instructions before preferences: a user
    who said "always..." asked for it in so many words), newest first within a kind. Every
    one it can hold comes before any detail: first each goes as its shortest form (a kept
    message: the sentences that state it, ``shortest_form``) while they fit; then, in the
    same order, those kept as a whole message go whole while the room allows. The section
    depends only on the memories and ``cap``, so it stays the same from turn to turn.

    When the section cannot hold them all and ``ranked`` names the ones that concern the new
    message (best first), up to :data:`TURN_INSTRUCTIONS` of those it left out go, as their
    sentences, in a block of this turn only (after the new message), within a
    :data:`TURN_INSTRUCTIONS_SHARE` of ``cap`` more, taken from ``room`` (what the prompt
    has left for this and the later sections): an instruction given long ago still reaches
    the answers it concerns."""
    standing = [m for m in memories if memory_kind_for(m.kind).section == "instructions"]
    out, left = _fill_instructions(standing, cap, max_items, meter)
    turn: list[tuple[FactItem, str, int]] = []
    if left and ranked:
        extra = min(cap // TURN_INSTRUCTIONS_SHARE, room - out.used)
        turn = _turn_instructions(left, ranked, extra, meter)
        if turn:
            frame = _frame_cost(meter, turn_instructions_frame())
            out.turn_blocks.append(turn_instructions_block([line for _, line, _ in turn]))
            out.included += [Included("instruction", item.id, n) for item, _, n in turn]
            out.used += frame + sum(n for _, _, n in turn)
            out.budget = cap + extra
    sent = {item.id for item, _, _ in turn}
    excluded += [
        Excluded("instruction", item.id, n, reason)
        for item, n, reason in left
        if item.id not in sent
    ]
    return out


def _fill_instructions(
    standing: Sequence[FactItem], cap: int, max_items: int, meter: Meter
) -> tuple[Picked, list[tuple[FactItem, int | None, str]]]:
    """The section within ``cap`` (see :func:`pick_instructions`), and what it left out with
    its tokens and the reason."""
    out = Picked("instructions", cap)
    used = _frame_cost(meter, instructions_frame())
    chosen: list[tuple[FactItem, str, int]] = []  # in keep order: item, its line, its tokens
    left: list[tuple[FactItem, int | None, str]] = []
    given = {item.id: at for at, item in enumerate(standing)}  # newest first
    for item in sorted(standing, key=lambda m: memory_kind_for(m.kind).keep_order):
        if len(chosen) >= max_items:
            left.append((item, item.tokens, "cap"))
            continue
        line = _instruction_line(item, short=True)
        n = meter.text(line) + 1  # and the joining newline
        if used + n > cap:
            left.append((item, n, "over_budget"))
            continue
        chosen.append((item, line, n))
        used += n
    for at, (item, line, n) in enumerate(chosen):
        whole = _instruction_line(item, short=False)
        if whole == line:
            continue
        extra = meter.text(whole) + 1 - n
        if used + extra <= cap:
            chosen[at] = (item, whole, n + extra)
            used += extra
    if chosen:
        chosen.sort(key=lambda c: -given[c[0].id])  # in the order they were given
        out.blocks.append(instructions_block([line for _, line, _ in chosen]))
        out.included = [Included("instruction", item.id, n) for item, _, n in chosen]
        out.used = used
    return out, left


def _turn_instructions(
    left: Sequence[tuple[FactItem, int | None, str]],
    ranked: Sequence[ItemId],
    room: int,
    meter: Meter,
) -> list[tuple[FactItem, str, int]]:
    """Of the instructions the section ``left`` out, the best ``ranked`` that fit ``room``
    with their block's frame, at most :data:`TURN_INSTRUCTIONS`, as their sentences."""
    by_id = {item.id: item for item, _, _ in left}
    used = _frame_cost(meter, turn_instructions_frame())
    out: list[tuple[FactItem, str, int]] = []
    for item_id in ranked:
        item = by_id.get(item_id)
        if item is None:
            continue
        line = _instruction_line(item, short=True)
        n = meter.text(line) + 1
        if used + n > room:
            continue
        out.append((item, line, n))
        used += n
        if len(out) >= TURN_INSTRUCTIONS:
            break
    return out


def _instruction_line(item: FactItem, *, short: bool) -> str:
    kind = memory_kind_for(item.kind)
    return instruction_line(kind.label, kind.shortest_form(item.text) if short else item.text)


def _summary_sort_key(s: SummaryItem) -> tuple[int, int]:
    return (-s.last_seq, _KIND_ORDER.get(s.kind, 9))


def _render_order(s: SummaryItem) -> tuple[int, int, int]:
    return (0 if s.kind == "carried" else 1, s.first_seq, s.last_seq)


def pick_summaries(
    summaries: Sequence[SummaryItem],
    cap: int,
    max_items: int,
    meter: Meter,
    excluded: list[Excluded],
    truncated: list[Truncation],
    min_cut: int,
) -> Picked:
    """Newest summaries first (by ``last_seq``), at most ``max_items``; one that does not fit
    is cut at its tail (head kept, visible marker) when at least ``min_cut`` tokens are left,
    else left out. Rendered chronologically, long-lived kinds first (the stable prefix)."""
    out = Picked("summaries", cap)
    chosen: list[tuple[SummaryItem, str]] = []
    seen: set[ItemId] = set()
    for s in sorted(summaries, key=_summary_sort_key):
        if s.id in seen:
            excluded.append(Excluded("summary", s.id, s.tokens, "duplicate"))
            continue
        seen.add(s.id)
        if len(chosen) >= max_items:
            excluded.append(Excluded("summary", s.id, s.tokens, "cap"))
            continue
        head, tail = summary_frame(s)
        frame = _frame_cost(meter, (head, tail))
        body = escape_block_text(s.text)
        if body == s.text:
            n_body = meter.stored("summary", s.id, s.text, s.tokens, s.counted_by)
        else:
            n_body = meter.text(body)
        room = cap - out.used - frame
        if n_body <= room:
            chosen.append((s, head + body + tail))
            out.used += frame + n_body
            out.included.append(Included("summary", s.id, frame + n_body))
        elif room >= min_cut:
            cut = truncate_tail(body, room, meter.counter, total_tokens=n_body)
            chosen.append((s, head + cut.text + tail))
            out.used += frame + cut.tokens
            out.included.append(Included("summary", s.id, frame + cut.tokens))
            truncated.append(Truncation("summary", s.id, n_body, cut.tokens))
        else:
            excluded.append(Excluded("summary", s.id, frame + n_body, "over_budget"))
    for s, text in sorted(chosen, key=lambda c: _render_order(c[0])):
        (out.stable_blocks if s.kind in STABLE_SUMMARY_KINDS else out.blocks).append(text)
    return out


@dataclass(slots=True)
class Retrieval:
    """Retrieved messages in the prompt (by id) and the tokens accounted for them.

    ``entries`` maps an id to the message and its line's own tokens (speaker label, body and
    the joining newline). What a line costs beyond that depends on its neighbours in the
    block: its time stamp (left out when the line above was sent in the same minute) and
    the ``…`` line before it when messages are omitted in between. :attr:`used` charges
    those exactly for the current entries, so accounting stays tight as entries come and go.
    """

    cap: int
    frame: int
    entries: dict[ItemId, tuple[MessageItem, int]] = field(default_factory=dict)
    #: Tokens of each stamp text (``"[2023-05-08 13:56] "``) and of one ``…`` line.
    stamp_tokens: dict[str, int] = field(default_factory=dict)
    gap_tokens: int = 2
    #: Entries shown as excerpts (a long reply shown for its exchange): the cut made.
    excerpts: dict[ItemId, Truncation] = field(default_factory=dict)
    #: The replies found by their own words shown whole, and their tokens: what they took of
    #: the whole replies' room (:func:`pick_retrieved`'s ``whole_room``).
    whole: dict[ItemId, int] = field(default_factory=dict)
    #: The entries' line costs, their sum and their ``(seq, id)`` in order, kept by
    #: :meth:`add` so a candidate is priced by the lines it touches, not the whole block;
    #: recomputed whenever ``entries`` was changed otherwise (removals, a shed block).
    _costs: dict[ItemId, int] = field(default_factory=dict, compare=False, repr=False)
    _total: int = field(default=0, compare=False, repr=False)
    _seqs: list[int] = field(default_factory=list, compare=False, repr=False)
    _ids: list[ItemId] = field(default_factory=list, compare=False, repr=False)

    @property
    def used(self) -> int:
        if not self.entries:
            return 0
        return self.frame + self._synced()

    def _synced(self) -> int:
        """The sum of the entries' line costs (the cached one when it still matches).

        Entries are added only through :meth:`_commit`, which prices them, and otherwise only
        leave (:meth:`remove`, a shed block's ``clear``), so the cache matches exactly when it
        holds as many lines: a length, not a comparison of every key on every add."""
        if len(self._costs) != len(self.entries):
            self._costs = self._line_costs(self.entries.values())
            self._total = sum(self._costs.values())
            ordered = sorted(self.entries.values(), key=lambda e: e[0].seq)
            self._seqs = [m.seq for m, _ in ordered]
            self._ids = [m.id for m, _ in ordered]
        return self._total

    def _window(self, fresh: Sequence[tuple[MessageItem, int]]) -> tuple[int, dict[ItemId, int]]:
        """Adding ``fresh``: the change in the sum of line costs, and the new costs of the
        lines it touches (its own, and each existing line whose line above changes). A
        line's cost depends only on the line above it, so the window runs from the existing
        line above the first fresh one to the existing line below the last."""
        self._synced()
        lowest = min(m.seq for m, _ in fresh)
        start = max(0, bisect_left(self._seqs, lowest) - 1)
        stop = bisect_right(self._seqs, max(m.seq for m, _ in fresh)) + 1
        existing = [self.entries[item_id] for item_id in self._ids[start:stop]]
        costs = self._line_costs([*existing, *fresh])
        first = self._ids[start] if start < len(self._ids) else None
        if first is not None and self.entries[first][0].seq < lowest:
            costs.pop(first)  # the line above the window: its own line above is unchanged
        before = sum(self._costs[item_id] for item_id in costs if item_id in self._costs)
        return sum(costs.values()) - before, costs

    def add(self, fresh: Sequence[tuple[MessageItem, int]]) -> None:
        """Add ``fresh`` entries (ids not in the block yet), keeping the costs current."""
        if fresh:
            self._commit(fresh, *self._window(fresh))

    def add_within(self, fresh: Sequence[tuple[MessageItem, int]]) -> bool:
        """Add ``fresh`` entries (ids not in the block yet) when the block then stays within
        its cap; whether they were added. The block is priced once for both."""
        if not fresh:
            return self.used <= self.cap
        delta, costs = self._window(fresh)
        if self.frame + self._total + delta > self.cap:
            return False
        self._commit(fresh, delta, costs)
        return True

    def _commit(
        self, fresh: Sequence[tuple[MessageItem, int]], delta: int, costs: dict[ItemId, int]
    ) -> None:
        for m, n in fresh:
            self.entries[m.id] = (m, n)
            at = bisect_right(self._seqs, m.seq)
            self._seqs.insert(at, m.seq)
            self._ids.insert(at, m.id)
        self._costs.update(costs)
        self._total += delta

    def _line_costs(self, entries: Iterable[tuple[MessageItem, int]]) -> dict[ItemId, int]:
        """Each line's full cost (own tokens, stamp when shown, gap line before it)."""
        costs: dict[ItemId, int] = {}
        previous: int | None = None  # the seq of the line above
        above = ""  # its stamp
        for m, n in sorted(entries, key=_entry_seq):
            stamp = retrieved_stamp(m)
            if previous is not None and m.seq > previous + 1:
                n += self.gap_tokens
            if stamp and (previous is None or stamp != above):
                n += self.stamp_tokens.get(stamp, STAMP_TOKENS_FALLBACK)
            costs[m.id] = n
            previous, above = m.seq, stamp
        return costs

    def used_with(self, fresh: Sequence[tuple[MessageItem, int]]) -> int:
        """What :attr:`used` would be with ``fresh`` entries added."""
        if not fresh:
            return self.used
        return self.frame + self._synced() + self._window(fresh)[0]

    def remove(self, ids: set[ItemId], excluded: list[Excluded]) -> int:
        """Drop entries whose ids are in ``ids`` (shown in history); return tokens freed."""
        before = self.used
        for item_id in ids & self.entries.keys():
            _, n = self.entries.pop(item_id)
            self.excerpts.pop(item_id, None)
            self.whole.pop(item_id, None)
            excluded.append(Excluded("retrieved", item_id, n, "duplicate"))
        return before - self.used

    def render(self, bot_name: str) -> str:
        if not self.entries:
            return ""
        head, tail = retrieved_frame()
        lines: list[str] = []
        previous: MessageItem | None = None
        for m, _ in sorted(self.entries.values(), key=lambda e: e[0].seq):
            if previous is not None and m.seq > previous.seq + 1:
                lines.append(RETRIEVED_GAP)
            lines.append(retrieved_line(m, bot_name, previous))
            previous = m
        return head + "\n".join(lines) + tail

    def included(self) -> list[Included]:
        costs = self._line_costs(self.entries.values())
        ordered = sorted(self.entries.values(), key=lambda e: e[0].seq)
        return [Included("retrieved", m.id, costs[m.id]) for m, _ in ordered]


def _entry_seq(entry: tuple[MessageItem, int]) -> int:
    return entry[0].seq


#: The share of the retrieval room replies found by their own words may fill whole (best
#: first; a new window's two blocks share it, ``Hybrid.fill``); lower-ranked replies go as
#: their head. Measured on long conversations
#: (``docs/cost.md``): people's own words, six times shorter than replies, are most of what
#: is asked about, but questions about the assistant's own advice want its replies whole.
WHOLE_REPLIES_SHARE = 0.65
#: Charged for a stamp whose count is unknown (never the case for picked entries).
STAMP_TOKENS_FALLBACK = 16
#: Per line, on top of the parts' separate counts: tokenizing the joined line can differ
#: from the sum of its parts by a token at the seams (the final recount has the last word).
LINE_SLACK_TOKENS = 1


def _line_tokens(m: MessageItem, meter: Meter, bot_name: str) -> int:
    """A line's own tokens: speaker label, body, the joining newline and the seam slack
    (priced once per assembly: both blocks of a new window ask for the same lines)."""
    key = (m, bot_name)
    known = meter.lines.get(key)
    if known is None:
        known = meter.lines[key] = _priced_line(m, meter, bot_name)
    return known


def _priced_line(m: MessageItem, meter: Meter, bot_name: str) -> int:
    body = retrieved_body(m)
    if body == m.content:
        n = meter.stored("message", m.id, m.content, m.tokens, m.counted_by)
    else:
        n = meter.text(body)
    return meter.small(retrieved_speaker(m, bot_name)) + n + 1 + LINE_SLACK_TOKENS


def _excerpt(m: MessageItem, limit: int, meter: Meter) -> tuple[MessageItem, Truncation | None]:
    """A reply shown for its exchange: its head within ``limit`` tokens, with a marker, when
    it is longer (assistant replies only: people's own words are never shortened)."""
    if limit <= 0 or m.role != "assistant" or m.tool_group is not None:
        return m, None
    n = meter.stored("message", m.id, m.content, m.tokens, m.counted_by)
    if n <= limit:
        return m, None
    cut = truncate_tail(m.content, limit, meter.counter, total_tokens=n)
    shown = m._replace(content=cut.text, tokens=cut.tokens, counted_by=meter.counter.name)
    return shown, Truncation("excerpt", m.id, n, cut.tokens)


def _steps(
    item: RetrievedItem, neighbors: int, excluded: list[Excluded]
) -> list[list[MessageItem]]:
    """[hit step, neighbour steps nearest first]; a step holds a message and its tool group."""
    hit = item.message
    older = sorted((n for n in item.neighbors if n.seq < hit.seq), key=lambda n: -n.seq)
    newer = sorted((n for n in item.neighbors if n.seq > hit.seq), key=lambda n: n.seq)
    near = sorted(older[:neighbors] + newer[:neighbors], key=lambda n: abs(n.seq - hit.seq))
    pool = drop_incomplete_groups([hit, *near], excluded, "retrieved")
    groups: dict[str, list[MessageItem]] = {}
    for m in pool:
        if m.tool_group is not None:
            groups.setdefault(m.tool_group, []).append(m)
    steps: list[list[MessageItem]] = []
    for m in pool:
        steps.append(groups[m.tool_group] if m.tool_group is not None else [m])
    return steps if pool and pool[0] is hit else []


def pick_retrieved(
    items: Sequence[RetrievedItem],
    cap: int,
    max_items: int,
    neighbors: int,
    skip_ids: set[ItemId],
    meter: Meter,
    bot_name: str,
    excluded: list[Excluded],
    *,
    shown_count: bool = False,
    excerpt_tokens: int = 0,
    whole_replies: float | None = None,
    whole_room: int | None = None,
) -> Retrieval:
    """Hits by descending score (at most ``max_items``), deduplicated against ``skip_ids``
    and each other; then, while the cap allows, up to ``neighbors`` turns on each side.
    A hit marked ``excerpt`` that is a long reply, and any long reply among the neighbours,
    goes as its first ``excerpt_tokens`` tokens (0: whole). With ``whole_replies`` (a share
    of ``cap``), replies found by their own words go whole, best first, until whole replies
    fill that share; lower-ranked ones go as their head too, so the rest of the room holds
    more of the conversation (a reply runs several times the length of a person's message).
    ``whole_room`` (tokens) replaces that share of ``cap`` when the prompt's retrieval room
    is shared by several picks (a new window's recalled block and the turn's own finds):
    the best-ranked replies, in whichever pick they land, take it first.

    ``shown_count``: a hit the prompt already shows (in ``skip_ids``) still takes its line's
    tokens from the cap, so the block holds only what the best ``cap`` tokens of hits lack
    (the hits a prompt of that size would hold, less those it already shows): when the
    prompt already holds what the new message is about, little or nothing is added, and a
    lower-ranked hit never stands in for a better one that is shown."""
    head, tail = retrieved_frame()
    out = Retrieval(
        cap, _frame_cost(meter, (head, tail)), gap_tokens=meter.small(RETRIEVED_GAP) + 1
    )
    ranked = sorted(items, key=lambda it: -it.score)
    plans: list[list[list[MessageItem]]] = []
    if whole_room is None and whole_replies is not None:
        whole_room = int(cap * whole_replies)
    whole_used = 0
    for it in ranked:
        hit = it.message
        if hit.id in skip_ids or hit.id in out.entries:
            excluded.append(Excluded("retrieved", hit.id, hit.tokens, "duplicate"))
            if shown_count and hit.id in skip_ids and out.cap > 0:
                out.cap = max(0, out.cap - _line_tokens(hit, meter, bot_name))
            continue
        if len(plans) >= max_items:
            excluded.append(Excluded("retrieved", hit.id, hit.tokens, "cap"))
            continue
        steps = _steps(it, neighbors, excluded)
        limit = excerpt_tokens if it.excerpt else 0
        whole = 0
        if not limit and whole_room is not None and hit.role == "assistant" and steps:
            whole = meter.stored("message", hit.id, hit.content, hit.tokens, hit.counted_by)
            if whole_used + whole > whole_room:
                limit, whole = excerpt_tokens, 0
        added = bool(steps) and _add(out, steps[0], meter, bot_name, skip_ids, limit)
        if not added and whole:
            # Within the whole replies' room but not the block's: it goes as its head.
            whole = 0
            added = _add(out, steps[0], meter, bot_name, skip_ids, excerpt_tokens)
        if not added:
            excluded.append(Excluded("retrieved", hit.id, hit.tokens, "over_budget"))
            continue
        if whole:
            whole_used += whole
            out.whole[hit.id] = whole
        plans.append(steps[1:])
    for steps in plans:
        for step in steps:
            _add(out, step, meter, bot_name, skip_ids, excerpt_tokens)
    return out


def _add(
    out: Retrieval,
    step: list[MessageItem],
    meter: Meter,
    bot_name: str,
    skip: set[ItemId],
    excerpt_tokens: int = 0,
) -> bool:
    fresh = [m for m in step if m.id not in out.entries and m.id not in skip]
    if not fresh:
        return True
    cuts: dict[ItemId, Truncation] = {}
    if excerpt_tokens > 0:
        shown = []
        for m in fresh:
            m, cut = _excerpt(m, excerpt_tokens, meter)
            shown.append(m)
            if cut is not None:
                cuts[m.id] = cut
        fresh = shown
    lines = [(m, _line_tokens(m, meter, bot_name)) for m in fresh]
    for m, _ in lines:
        stamp = retrieved_stamp(m)
        if stamp and stamp not in out.stamp_tokens:
            out.stamp_tokens[stamp] = meter.small(stamp)
    if not out.add_within(lines):
        return False
    out.excerpts.update(cuts)
    return True
