"""History units and the columns of a history.

A unit is one message, or every message between a tool call and its results, so a call and
its results are kept or dropped together. Columns are the fields of many messages at once,
read in C-level passes where the common case (no tool groups) needs no unit building.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from operator import attrgetter
from typing import Any, NamedTuple, cast

from .formatting import TurnText
from .types import Excluded, Included, ItemId, MessageItem

_tool_group = attrgetter("tool_group")


def drop_incomplete_groups(
    messages: Sequence[MessageItem],
    excluded: list[Excluded],
    kind: str = "message",
    present: MessageItem | None = None,
) -> list[MessageItem]:
    """Messages whose tool group lacks its call (assistant) or its result (tool) are left out;
    ``present`` (the new message) counts as part of the group it belongs to."""
    groups = list(map(_tool_group, messages))
    if groups.count(None) == len(groups):  # the common case: no tool groups
        return list(messages)
    roles: dict[str, set[str]] = {}
    for m in (*messages, *([present] if present is not None else [])):
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


_new_included = cast(Callable[[Iterable[Any]], Included], partial(tuple.__new__, Included))


#: Distinct history records the record memo holds before it starts afresh.
RECORD_MEMO_MAX = 50_000
#: ``Included("message", id, tokens)`` records made in this process, by ``(id, tokens)``.
_record_memo: dict[tuple[ItemId, int], Included] = {}


def message_records(ids: Sequence[ItemId], tokens: Sequence[int]) -> list[Included]:
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
