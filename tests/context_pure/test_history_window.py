"""The cached history window: kept whole while it fits, restarted at the trim mark when it
does not, so that turns in between only append to the prompt."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chatplatform.core.context import (
    AssemblyInputs,
    MessageItem,
    PackingPolicy,
    RetrievedItem,
    assemble,
)

from .helpers import COUNTER, check_invariants

POLICY = PackingPolicy(
    strategy="sliding_window",
    context_window=3_000,
    max_context_tokens=3_000,
    reserved_response_tokens=1_000,
    system_budget=100,
    facts_budget=0,
    summaries_budget=0,
    retrieval_budget=0,
    min_recent_messages=4,
    recent_message_cap=500,
    history_trim_percent=50,
)


def turn(seq: int, words: int = 20) -> MessageItem:
    role: Any = "user" if seq % 2 else "assistant"
    return MessageItem(seq, seq, role, " ".join(f"word{seq}x{i}" for i in range(words)))


def replay(policy: PackingPolicy, lengths: list[int]) -> list[tuple[int | None, bool, int]]:
    """Assemble each user turn of a chat whose messages have ``lengths`` words, continuing the
    window each time; return (window start, kept, prompt tokens) per turn."""
    messages = [turn(i + 1, n) for i, n in enumerate(lengths)]
    start: int | None = None
    out = []
    for new in messages:
        if new.role != "user":
            continue
        older = [m for m in messages if m.seq < new.seq]
        inputs = AssemblyInputs(
            new_message=new, recent=list(reversed(older)), window_start_seq=start
        )
        result = assemble(policy, inputs, COUNTER)
        check_invariants(policy, inputs, result)
        start = result.window_start_seq
        out.append((start, result.window_kept, result.prompt_tokens))
    return out


def test_the_window_is_kept_until_it_overflows_then_restarts_at_the_trim_mark() -> None:
    turns = replay(POLICY, [20] * 200)
    starts = [s for s, _, _ in turns]
    restarts = [i for i, (_, kept, _) in enumerate(turns) if not kept]
    # the window moves only at restarts, and there are few of them
    for i in range(1, len(turns)):
        if i not in restarts:
            assert starts[i] == starts[i - 1]
    assert 2 <= len(restarts) <= len(turns) // 5
    # right after a restart the prompt is about half the room, then it grows back
    overflows = [i for i in restarts if i > 2]
    after = [turns[i][2] for i in overflows]
    before = [turns[i - 1][2] for i in overflows]
    assert all(a < b * 0.75 for a, b in zip(after, before, strict=True))


def test_full_trim_mark_fills_the_room_every_turn() -> None:
    turns = replay(replace(POLICY, history_trim_percent=100), [20] * 120)
    tokens = [t for _, _, t in turns[20:]]
    assert max(tokens) - min(tokens) < 200


def test_a_window_start_newer_than_the_guaranteed_messages_restarts() -> None:
    messages = [turn(i + 1) for i in range(40)]
    new = turn(41)
    inputs = AssemblyInputs(new_message=new, recent=list(reversed(messages)), window_start_seq=39)
    result = assemble(POLICY, inputs, COUNTER)
    assert not result.window_kept
    assert [i.id for i in result.included if i.kind == "message"][-4:] == [37, 38, 39, 40]


@settings(max_examples=30, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 400), min_size=2, max_size=60),
    trim=st.sampled_from([10, 35, 60, 100]),
    min_recent=st.integers(0, 6),
)
def test_replays_keep_every_guarantee(lengths: list[int], trim: int, min_recent: int) -> None:
    policy = replace(POLICY, history_trim_percent=trim, min_recent_messages=min_recent)
    for start, kept, tokens in replay(policy, lengths):
        assert tokens <= 2_000
        assert not kept or start is not None


HYBRID = replace(
    POLICY,
    strategy="hybrid",
    retrieval_budget=1_000,
    retrieval_max_items=10,
    turn_retrieval_percent=20,
)


def test_a_kept_window_sends_its_recalled_messages_again_and_this_turns_finds_after() -> None:
    old = [turn(i + 1, 5) for i in range(60)]
    new = turn(61, 5)
    first = AssemblyInputs(
        new_message=new,
        recent=list(reversed(old)),
        retrieved=[RetrievedItem(old[4], 1.0), RetrievedItem(old[9], 0.5)],
    )
    started = assemble(HYBRID, first, COUNTER)
    assert started.recalled_ids == (5, 10) and "word5x0" in started.system
    assert not started.tail
    later = turn(63, 5)
    messages = [*old, new, turn(62, 5)]
    by_id = {m.id: m for m in messages}
    second = AssemblyInputs(
        new_message=later,
        recent=list(reversed(messages)),
        window_start_seq=started.window_start_seq,
        recalled=[by_id[i] for i in started.recalled_ids],
        retrieved=[RetrievedItem(old[19], 1.0), RetrievedItem(old[4], 0.9)],
    )
    kept = assemble(HYBRID, second, COUNTER)
    check_invariants(HYBRID, second, kept)
    assert kept.window_kept and kept.recalled_ids == (5, 10)
    # the cached prefix is unchanged; the new find travels after the new message
    assert kept.system == started.system
    assert "word20x0" in kept.tail and "word5x0" not in kept.tail
    assert ("retrieved", 5, None, "duplicate") in [
        (e.kind, e.id, None, e.reason) for e in kept.excluded
    ]
    # The retrieval section's budget is the recalled messages as kept plus this turn's share,
    # never the whole room the kept window happened to fit in.
    section = {s.name: s for s in kept.sections}["retrieval"]
    assert section.used <= section.budget <= section.used + HYBRID.retrieval_budget


def test_messages_the_trim_mark_left_out_are_not_reported_as_over_budget() -> None:
    # A restart at the trim mark leaves out messages the room still had space for: they are
    # "trimmed with the window", and only those past the room "did not fit the budget".
    messages = [turn(i + 1) for i in range(200)]
    new = turn(201)
    inputs = AssemblyInputs(new_message=new, recent=list(reversed(messages)))
    result = assemble(POLICY, inputs, COUNTER)
    assert not result.window_kept
    reasons = {int(e.id): e.reason for e in result.excluded if e.kind == "message"}
    trimmed = sorted(i for i, r in reasons.items() if r == "window_trim")
    over = sorted(i for i, r in reasons.items() if r == "over_budget")
    assert trimmed and over
    kept = min(int(i.id) for i in result.included if i.kind == "message")
    assert max(over) < min(trimmed) < kept
    # what was trimmed is what the unused room would have held
    unused = POLICY.max_context_tokens - POLICY.reserved_response_tokens - result.prompt_tokens
    per_message = result.prompt_tokens / (len(result.included) + 2)
    assert len(trimmed) * per_message <= unused * 1.2
    assert (len(trimmed) + 2) * per_message > unused * 0.8


def test_a_full_trim_mark_reports_what_is_left_out_as_over_budget() -> None:
    messages = [turn(i + 1) for i in range(200)]
    inputs = AssemblyInputs(new_message=turn(201), recent=list(reversed(messages)))
    result = assemble(replace(POLICY, history_trim_percent=100), inputs, COUNTER)
    reasons = {e.reason for e in result.excluded if e.kind == "message"}
    assert reasons == {"over_budget"}


def test_with_nothing_cached_this_turns_finds_fill_what_the_new_window_leaves() -> None:
    """After a pause (no window to continue) the prompt is written in full anyway: the new
    window stops at the trim mark, and older messages that match the new one fill the rest of
    the room, within the retrieval budget, after the new message. A restart while the cache
    lives leaves that room empty, for the next turns to append to."""
    policy = replace(
        HYBRID, retrieval_budget=1_800, retrieval_max_items=60, history_trim_percent=40
    )
    old = [turn(i + 1, 12) for i in range(120)]
    new = turn(121, 5)
    finds = [RetrievedItem(old[i], 1.0 - i / 100) for i in range(0, 60, 2)]
    cold = AssemblyInputs(new_message=new, recent=list(reversed(old)), retrieved=finds)
    after_pause = assemble(policy, cold, COUNTER)
    check_invariants(policy, cold, after_pause)
    # The best finds start the new window (cached from the next turn on); the next ones, which
    # the trim mark left out, travel after the new message for this turn.
    assert after_pause.recalled_ids[:2] == (1, 3) and "word1x0" in after_pause.system
    left = [f.message.id for f in finds if f.message.id not in after_pause.recalled_ids]
    assert f"word{left[0]}x0" in after_pause.tail

    # The same turn while a window is cached but no longer fits: restarted at the trim mark,
    # this turn's finds limited to its share.
    warm = replace(cold, window_start_seq=2)
    restarted = assemble(policy, warm, COUNTER)
    check_invariants(policy, warm, restarted)
    assert not restarted.window_kept and not restarted.tail
    assert after_pause.prompt_tokens > restarted.prompt_tokens + 300
    assert after_pause.window_start_seq == restarted.window_start_seq  # the same window


def test_with_nothing_cached_the_prompt_fills_its_room_whatever_the_retrieval_budget() -> None:
    """A cold prompt is written in full anyway, so the room the new window leaves goes to this
    turn's finds even past the retrieval budget: a room that stays empty buys nothing."""
    policy = replace(HYBRID, retrieval_budget=300, retrieval_max_items=80, history_trim_percent=40)
    old = [turn(i + 1, 12) for i in range(160)]
    finds = [RetrievedItem(old[i], 1.0 - i / 200) for i in range(0, 120, 2)]
    cold = AssemblyInputs(new_message=turn(161, 5), recent=list(reversed(old)), retrieved=finds)
    result = assemble(policy, cold, COUNTER)
    check_invariants(policy, cold, result)
    room = policy.max_context_tokens - policy.reserved_response_tokens
    # The window at its trim mark and the retrieval budget alone would hold about 1,100.
    assert result.prompt_tokens > 0.9 * room
    retrieval = next(s for s in result.sections if s.name == "retrieval")
    assert policy.retrieval_budget * 3 < retrieval.used <= retrieval.budget


def _warm_turn(retrieved: list[RetrievedItem], share: int) -> tuple[Any, AssemblyInputs, Any]:
    """A turn on a kept window (no recalled messages), with ``retrieved`` as its finds."""
    policy = replace(HYBRID, turn_retrieval_percent=share, retrieval_max_items=40)
    old = [turn(i + 1, 5) for i in range(60)]
    new = turn(61, 5)
    started = assemble(policy, AssemblyInputs(new_message=new, recent=list(reversed(old))), COUNTER)
    messages = [*old, new, turn(62, 5)]
    inputs = AssemblyInputs(
        new_message=turn(63, 5),
        recent=list(reversed(messages)),
        window_start_seq=started.window_start_seq,
        retrieved=retrieved,
    )
    result = assemble(policy, inputs, COUNTER)
    check_invariants(policy, inputs, result)
    assert result.window_kept
    return policy, inputs, result


def test_a_kept_windows_turn_adds_only_what_its_best_finds_lack() -> None:
    """While the window is kept, this turn's finds are the hits its share would hold, less
    those the prompt already shows: when the window already holds the best hits, the
    lower-ranked ones do not fill the share (they would be paid in full on every turn)."""
    shown = list(range(62, 40, -1))  # the newest messages, in the kept window
    old = [turn(i + 1, 5) for i in range(60)]
    by_seq = {m.seq: m for m in [*old, turn(61, 5), turn(62, 5)]}
    # The best hits are in the window: the share is spent on them, nothing is added.
    on_topic = [RetrievedItem(by_seq[s], 10.0 - i / 10) for i, s in enumerate(shown)]
    on_topic += [RetrievedItem(old[i], 1.0 - i / 100) for i in range(10)]
    _, _, result = _warm_turn(on_topic, 20)
    assert result.window_start_seq is not None and result.window_start_seq <= 41
    assert not result.tail
    # The same finds ranked the other way round: the old ones are the best, they are added.
    flipped = [RetrievedItem(r.message, 20.0 - r.score) for r in on_topic]
    _, _, result = _warm_turn(flipped, 20)
    assert "word10x0" in result.tail and "word9x0" in result.tail
