"""The history walk: bulk taking (bisection) and remembered units must change nothing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from chats.context.history import History, Meter, group_units, unit_memo
from chats.context.types import MessageItem

from .helpers import COUNTER


def reference_take(history: History, room: int) -> int:
    """How many units the one-unit-at-a-time rule takes: stop at the first unit whose
    running total plus its start cost (when it starts with the assistant) exceeds ``room``."""
    body = 0
    for k, unit in enumerate(history.units):
        measured = history._measure(unit)
        start = history.start_cost if measured.turns[0].role == "assistant" else 0
        if body + measured.tokens + start > room:
            return k
        body += measured.tokens
    return len(history.units)


@st.composite
def newest_first(draw: st.DrawFn) -> list[MessageItem]:
    size = draw(st.integers(0, 40))
    roles = draw(st.lists(st.sampled_from(["user", "assistant"]), min_size=size, max_size=size))
    tokens = draw(st.lists(st.integers(0, 60), min_size=size, max_size=size))
    return [
        MessageItem(
            id=seq,
            seq=seq,
            role=role,  # type: ignore[arg-type]
            content=f"message {seq}",
            tokens=n,
            counted_by=COUNTER.name,
        )
        for seq, role, n in zip(range(size, 0, -1), roles, tokens, strict=True)
    ]


@settings(max_examples=200, deadline=None)
@given(messages=newest_first(), room=st.integers(0, 1500), first=st.integers(0, 10))
def test_bulk_walk_takes_what_the_one_at_a_time_rule_takes(
    messages: list[MessageItem], room: int, first: int
) -> None:
    meter = Meter(COUNTER, COUNTER.message_overhead)
    expected = reference_take(History(group_units(messages), meter, False), room)
    history = History(group_units(messages), meter, False)
    history.extend(room, max_messages=first)  # the min-recent step, then the bulk step
    history.extend(room)
    assert len(history.taken) == expected
    assert history.used <= room or not history.taken


def test_remembered_units_are_keyed_by_everything_that_shapes_them() -> None:
    meter = Meter(COUNTER, COUNTER.message_overhead)
    item = MessageItem(id=1, seq=1, role="user", content="hi", author="Ann", tokens=1)
    first = History([(item,)], meter, True)._measure((item,))
    assert History([(item,)], meter, True)._measure((item,)) is first  # remembered
    assert History([(item,)], meter, False)._measure((item,)) is not first  # other chat kind
    edited = item._replace(content="hello")
    assert History([(edited,)], meter, True)._measure((edited,)).turns[0].content == "hello"


def test_units_needing_a_recount_are_never_remembered() -> None:
    meter = Meter(COUNTER, COUNTER.message_overhead)
    foreign = MessageItem(
        id=7,
        seq=7,
        role="user",
        content="counted elsewhere",
        tokens=3,
        counted_by="another-counter",
    )
    History([(foreign,)], meter, False)._measure((foreign,))
    assert unit_memo(COUNTER, False, meter.overhead).get(foreign) is None
    assert [r.id for r in meter.recounted] == [7]
