"""The history walk: bulk taking (bisection) and remembered units must change nothing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from chatplatform.core.context.formatting import CONVERSATION_START
from chatplatform.core.context.history import History
from chatplatform.core.context.layout import provider_messages
from chatplatform.core.context.meter import CountMemo, Meter
from chatplatform.core.context.types import MessageItem

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
    # Sometimes with legacy rows (no count): the history is then measured unit by unit.
    counts = st.one_of(st.none(), st.integers(0, 60)) if draw(st.booleans()) else st.integers(0, 60)
    tokens = draw(st.lists(counts, min_size=size, max_size=size))
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
    expected = reference_take(History(messages, meter, False), room)
    history = History(messages, meter, False)
    history.extend(room, max_messages=first)  # the min-recent step, then the bulk step
    history.extend(room)
    assert (history._plain is not None) == (None not in [m.tokens for m in messages])
    assert history.count == expected
    assert history.used <= room or not history.count


@st.composite
def plain_history(draw: st.DrawFn) -> list[MessageItem]:
    """Newest first, one message per unit, all counted by the counter: any roles, quoted
    excerpts and authors (the shapes of the turns' prefixes)."""
    size = draw(st.integers(0, 30))
    return [
        MessageItem(
            id=seq,
            seq=seq,
            role=draw(st.sampled_from(["user", "assistant", "tool"])),
            content=f"message {seq}",
            author=draw(st.sampled_from(["", "Ann (@ann)", "@bo [admin]"])),
            tokens=draw(st.integers(0, 60)),
            counted_by=draw(st.sampled_from([None, COUNTER.name])),
            reply_to_excerpt=draw(st.sampled_from([None, "", "the plan", 'say "hi"'])),
        )
        for seq in range(size, 0, -1)
    ]


@settings(max_examples=200, deadline=None)
@given(messages=plain_history(), multi_user=st.booleans(), room=st.integers(0, 1500))
def test_plain_columns_measure_and_render_what_one_unit_at_a_time_does(
    messages: list[MessageItem], multi_user: bool, room: int
) -> None:
    meter = Meter(COUNTER, COUNTER.message_overhead)
    history = History(messages, meter, multi_user)
    assert history._plain is not None
    for k, unit in enumerate(history.units):
        alone = history._measure(unit)
        columns = history._unit(k)
        assert (columns.tokens, list(columns.turns), list(columns.records)) == (
            alone.tokens,
            list(alone.turns),
            list(alone.records),
        )
    history.extend(room)
    turns = history.turns()
    assert history.roles_and_texts() == ([t.role for t in turns], [t.text for t in turns])
    assert history.included() == [
        r for k in range(history.count - 1, -1, -1) for r in history._unit(k).records
    ]
    assert history.ids() == {m.id for m in messages[: history.count]}
    assert meter.recounted == []


def test_histories_needing_a_recount_are_measured_only_as_far_as_the_walk_goes() -> None:
    meter = Meter(COUNTER, COUNTER.message_overhead)
    messages = [
        MessageItem(id=seq, seq=seq, role="user", content="counted elsewhere", tokens=3)
        for seq in range(5, 0, -1)
    ]
    messages[1] = messages[1]._replace(counted_by="another-counter")
    history = History(messages, meter, False)
    assert history._plain is None
    one = history._measure(history.units[0]).tokens
    history.extend(2 * one)  # the third message does not fit: it is the last one measured
    assert history.count == 2
    assert [r.id for r in meter.recounted] == [4]  # the foreign count, reached and reported
    assert len(history._built) == 3


def test_provider_messages_merge_same_role_turns_and_start_with_the_user() -> None:
    assert provider_messages(["user", "assistant", "user"], ["a", "b", "c"]) == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    assert provider_messages(["assistant", "assistant", "user", "user"], list("abcd")) == [
        {"role": "user", "content": CONVERSATION_START},
        {"role": "assistant", "content": "a\n\nb"},
        {"role": "user", "content": "c\n\nd"},
    ]


def test_count_memo_keeps_what_recent_turns_used_within_its_bound() -> None:
    memo = CountMemo(max_chars=40)  # generations of 20 characters: five 4-character texts
    for n, text in enumerate(("aaaa", "bbbb", "cccc", "dddd", "eeee", "ffff")):
        memo.put(text, n)  # "ffff" starts a new generation
    assert memo.get_many(["aaaa", "ffff", "zzzz"]) == (5, ["zzzz"])  # "aaaa" moves up
    for text in ("gggg", "hhhh", "iiii", "jjjj"):
        memo.put(text, 9)  # "jjjj" starts another generation: the first one goes
    assert memo.get("aaaa") == 0  # used during the last generation: kept
    assert memo.get("bbbb") is None  # not used since: gone
    assert sum(map(len, (*memo._young, *memo._old))) <= 40
