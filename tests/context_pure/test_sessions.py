"""Where a rolling summary's chunk ends: at a pause longer than the session gap once it is
over, else after the interval, and never past the raw history (pure, no database)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from chatplatform.core.context.sessions import chunk_end, ends_session, merge_run, session_groups

GAP = timedelta(hours=3)
START = datetime(2025, 3, 1, 9, 0)


def stamps(first_seq: int, minutes: list[int]) -> list[tuple[int, datetime]]:
    """Messages from ``first_seq`` on, written ``minutes`` after the start."""
    return [(first_seq + i, START + timedelta(minutes=m)) for i, m in enumerate(minutes)]


def test_a_chunk_ends_at_the_last_message_before_a_long_pause():
    # Messages 5-7 in the morning, 8 on the next day: a chunk of three, under the interval.
    rows = stamps(5, [0, 1, 2, 24 * 60, 24 * 60 + 1])
    assert chunk_end(rows, last_allowed=9, size=10, gap=GAP) == 7


def test_a_pause_no_longer_than_the_gap_does_not_end_a_session():
    rows = stamps(1, [0, 180, 360, 540])  # exactly three hours apart each
    assert chunk_end(rows, last_allowed=3, size=10, gap=GAP) is None
    assert chunk_end(rows, last_allowed=3, size=3, gap=GAP) == 3


def test_a_session_longer_than_the_interval_splits_by_the_interval():
    rows = stamps(1, list(range(11)))  # one session; the interval is 10
    assert chunk_end(rows, last_allowed=40, size=10, gap=GAP) == 10


def test_a_pause_right_after_a_full_chunk_ends_it_there():
    rows = stamps(1, [*range(10), 2000])
    assert chunk_end(rows, last_allowed=40, size=10, gap=GAP) == 10


def test_a_session_still_going_is_not_complete_until_the_conversation_is_quiet():
    # 1-4 may be summarised; 5 and 6 are the raw history, same session: no pause yet.
    rows = stamps(1, [0, 1, 2, 3, 4, 5])
    assert chunk_end(rows, last_allowed=4, size=10, gap=GAP) is None
    assert chunk_end(rows, last_allowed=4, size=10, gap=GAP, quiet=True) == 4


def test_a_pause_after_the_raw_history_starts_does_not_count():
    # The pause follows message 6, which stays raw: the chunk may not reach it.
    rows = stamps(1, [0, 1, 2, 3, 4, 5, 900])
    assert chunk_end(rows, last_allowed=4, size=10, gap=GAP) is None


def test_nothing_to_summarise():
    assert chunk_end([], last_allowed=10, size=10, gap=GAP, quiet=True) is None
    assert chunk_end(stamps(7, [0, 1]), last_allowed=6, size=10, gap=GAP, quiet=True) is None


def test_gaps_in_the_numbering_are_messages_that_are_not_there():
    rows = [(1, START), (2, START), (5, START + timedelta(days=1)), (6, START)]
    assert chunk_end(rows, last_allowed=6, size=10, gap=GAP) == 2


def test_ends_session():
    assert ends_session(START, START + GAP + timedelta(seconds=1), GAP)
    assert not ends_session(START, START + GAP, GAP)
    assert not ends_session(None, START, GAP) and not ends_session(START, None, GAP)


@given(
    minutes=st.lists(st.integers(0, 600), min_size=1, max_size=30),
    size=st.integers(1, 12),
    raw=st.integers(0, 6),
    quiet=st.booleans(),
)
def test_a_chunk_never_spans_a_long_pause_nor_passes_its_limits(minutes, size, raw, quiet):
    times = [START]
    for m in minutes[1:]:
        times.append(times[-1] + timedelta(minutes=m))
    rows = [(i + 1, t) for i, t in enumerate(times)]
    last_allowed = len(rows) - raw
    end = chunk_end(rows[: size + 1], last_allowed=last_allowed, size=size, gap=GAP, quiet=quiet)
    if end is None:
        # Nothing complete: no pause inside what may be summarised, and less than a chunk.
        allowed = min(size, last_allowed)
        pauses = [
            i for i in range(1, min(allowed, len(rows) - 1) + 1) if times[i] - times[i - 1] > GAP
        ]
        assert not pauses and (allowed < size or last_allowed <= 0) and not (quiet and allowed > 0)
        return
    assert 1 <= end <= min(size, last_allowed)
    inside = times[:end]
    assert all(b - a <= GAP for a, b in itertools.pairwise(inside))
    # It stops short of the interval only at a pause that is over, or when quiet at the end.
    if end < size:
        assert (end < len(times) and times[end] - times[end - 1] > GAP) or (
            quiet and end == last_allowed
        )


DAY = timedelta(days=1)


def spans(*days: float) -> list[tuple[datetime, datetime]]:
    """Summaries each of messages written on one day (``days`` after the start)."""
    return [(START + d * DAY, START + d * DAY + timedelta(minutes=30)) for d in days]


def test_session_groups_are_the_completed_sessions_of_several_summaries():
    # Sessions: day 0 (one summary), day 1 (three), day 2 (one), day 3 (two, still going).
    run = spans(0, 1, 1.01, 1.02, 2, 3, 3.01)
    assert session_groups(run, GAP) == [(1, 4)]
    assert session_groups(run[:4], GAP) == []  # nothing after the second session yet
    assert session_groups(spans(0, 0.01, 1), GAP) == [(0, 2)]
    assert session_groups([], GAP) == []


def test_a_merge_takes_whole_sessions_else_stays_within_one():
    # Oldest up to a session end that leaves at most three.
    assert merge_run(spans(0, 1, 1.01, 2, 3), 3, GAP) == (0, 3)
    # Whole sessions would leave only the newest: the going session's older chunks instead.
    assert merge_run(spans(0, 1, 1.01, 1.02), 3, GAP) == (1, 3)
    # No session boundary to respect and nothing within one session short of the newest.
    assert merge_run(spans(0, 1, 2, 3), 3, GAP) == (0, 2)
    assert merge_run(spans(0, 0.01, 0.02), 1, GAP) == (0, 3)  # everything into one


@given(
    days=st.lists(st.sampled_from([0.0, 0.01, 1.0]), min_size=2, max_size=12),
    keep=st.integers(1, 5),
)
def test_a_merge_leaves_at_most_keep_and_splits_a_session_only_when_it_must(days, keep):
    offsets = [sum(days[: i + 1]) for i in range(len(days))]
    run = spans(*offsets)
    if len(run) <= keep:
        return
    start, stop = merge_run(run, keep, GAP)
    assert 0 <= start < stop <= len(run) and stop - start >= 2
    assert len(run) - (stop - start) + 1 <= keep
    ends = [ends_session(a[1], b[0], GAP) for a, b in itertools.pairwise(run)]
    whole = start == 0 and ends[stop - 1] if stop < len(run) else False
    within = not any(ends[start : stop - 1]) and stop < len(run)
    if not (whole or within):
        assert (start, stop) == (0, len(run) - keep + 1)  # the fallback, when nothing fits
