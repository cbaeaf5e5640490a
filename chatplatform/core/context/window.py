"""The sliding window: which history messages the prompt keeps, and when the window restarts.

Candidates: the conversation's messages newest first, at most the policy's message cap,
starting where the strategy says (:mod:`.strategies`), without empty messages or tool groups
that lack their call or their result.

The window is what a provider can cache. A turn keeps the previous turn's window whole (from
``window_start_seq``, with the retrieved messages it started with) while it fits, so the
history only grows at its end and the cached prefix stands. When it no longer fits, the
window restarts: it is trimmed to the trim mark (``history_trim_percent`` of the room), never
so small that the prompt up to its end falls below the model's minimum cacheable length, so
the next turns can append again before the next restart.
"""

from __future__ import annotations

from itertools import islice
from operator import attrgetter, gt
from typing import Any

from .draft import Draft
from .history import History
from .sections import Retrieval, pick_retrieved
from .types import AssemblyInputs, Excluded, MessageItem, PackingPolicy, RetrievedItem
from .units import CONTENT, ID, SEQ, TOOL_GROUP, drop_incomplete_groups, transpose

_seq = attrgetter("seq")

#: Kept above the model's minimum cacheable length: our count and the provider's differ.
CACHE_MIN_SLACK = 64


def history_candidates(
    inputs: AssemblyInputs, limit: int, after: int | None, excluded: list[Excluded]
) -> tuple[list[MessageItem], list[tuple[Any, ...]] | None]:
    """History candidates, newest first, and their columns (``transpose``) when at hand: at
    most ``limit`` messages, only those after seq ``after`` when it is given."""
    new_id = inputs.new_message.id
    if after is None and len(inputs.recent) <= limit:
        # The common case, hundreds of messages per turn, in C-level passes over columns:
        # already newest first (as the caller gives them), without the new message, none
        # empty, no tool groups: all of them are candidates.
        columns = transpose(inputs.recent)
        seqs, contents, groups = columns[SEQ], columns[CONTENT], columns[TOOL_GROUP]
        if (
            all(map(gt, seqs, islice(seqs, 1, None)))
            and new_id not in columns[ID]
            and all(contents)
            and not any(map(str.isspace, contents))
            and groups.count(None) == len(groups)
        ):
            return list(inputs.recent), columns
    out: list[MessageItem] = []
    append = out.append
    for m in sorted(inputs.recent, key=_seq, reverse=True):
        if m.id == new_id:
            continue
        if after is not None and m.seq <= after:
            excluded.append(Excluded("message", m.id, m.tokens, "outside_window"))
        elif len(out) >= limit:
            excluded.append(Excluded("message", m.id, m.tokens, "cap"))
        elif (not m.content or m.content.isspace()) and m.tool_group is None:
            excluded.append(Excluded("message", m.id, m.tokens, "empty"))
        else:
            append(m)
    # The new message may be the results of the newest reply's tool calls: their group has both.
    return drop_incomplete_groups(out, excluded, present=inputs.new_message), None


def window_messages(history: History, start_seq: int | None) -> int | None:
    """How many of the newest messages have a seq of at least ``start_seq`` (the cached
    window), or ``None`` without a window or when it starts inside a unit."""
    if start_seq is None:
        return None
    n = 0
    for unit in history.newest_units():
        if unit[-1].seq < start_seq:
            break
        if unit[0].seq < start_seq:
            return None
        n += len(unit)
    return n


def keep_window(d: Draft, policy: PackingPolicy, room: int) -> bool:
    """Take the whole cached window (its recalled messages and its history from
    ``window_start_seq``) if it fits in ``room``; otherwise keep only the guaranteed recent
    messages and return False."""
    history, inputs = d.history, d.inputs
    window = window_messages(history, inputs.window_start_seq)
    if window is None or window < history.messages:
        return False
    recalled = Retrieval(0, 0)
    if inputs.recalled:
        recalled = pick_retrieved(
            [RetrievedItem(m, excerpt=m.id in inputs.recalled_excerpts) for m in inputs.recalled],
            room,
            len(inputs.recalled),
            0,
            {inputs.new_message.id},
            d.meter,
            inputs.bot_name,
            [],
            excerpt_tokens=policy.reply_excerpt_tokens,
        )
        if len(recalled.entries) < len(inputs.recalled):
            return False
    history.extend(room - recalled.used, max_messages=window)
    if history.messages >= window and not recalled.entries.keys() & history.ids():
        d.recalled = recalled
        return True
    history.reset()
    history.extend(room, max_messages=policy.min_recent_messages)
    return False


def restart_size(d: Draft, policy: PackingPolicy, room: int) -> int:
    """The size a new window starts at: the trim mark of its ``room``, but never so small
    that the prompt up to the window's end falls below the model's minimum cacheable length
    (the provider would cache nothing of it), as far as the room allows."""
    size = room * policy.history_trim_percent // 100
    if policy.cache_min_tokens:
        before = d.plan.framing + d.system_tokens + d.facts.used + d.summaries.used
        size = max(size, policy.cache_min_tokens + CACHE_MIN_SLACK - before)
    return min(room, size)
