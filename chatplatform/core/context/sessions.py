"""Conversation sessions: runs of messages with no pause longer than a gap between them.

A rolling summary covers part of one session at most: its chunk of messages ends at the last
message before a pause longer than the gap, even when that leaves it shorter than the
policy's interval, once the pause is over (a later message came, or the conversation has
been quiet for longer than the gap); a session longer than the interval still splits by the
interval. A session its chunks complete becomes one summary (:func:`session_groups`), and
merges of summaries take whole sessions where they can, else stay within one
(:func:`merge_run`). Pure: the caller fetches the few rows these look at.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import datetime, timedelta


def chunk_end(
    stamps: Sequence[tuple[int, datetime]],
    *,
    last_allowed: int,
    size: int,
    gap: timedelta,
    quiet: bool = False,
) -> int | None:
    """The seq of the last message of the next rolling chunk, or ``None`` when no chunk is
    complete yet.

    ``stamps`` are ``(seq, created_at)`` of the first unsummarised messages, oldest first:
    at most ``size + 1``, so the message after a full chunk is there to show a pause.
    Messages after ``last_allowed`` stay raw (they are only looked at for the pause).
    ``quiet``: the conversation's newest message is older than ``gap`` (its last session is
    over, so whatever may be summarised of it is complete).

    The chunk ends at the first pause longer than ``gap`` among its first ``size`` messages;
    without one, it is ``size`` messages when that many may be summarised, or all that may
    be when the conversation is quiet.
    """
    allowed = [s for s in stamps[:size] if s[0] <= last_allowed]
    if not allowed:
        return None
    for (seq, at), (_, following) in itertools.pairwise(stamps):
        if seq > allowed[-1][0]:
            break
        if following - at > gap:
            return seq
    if len(allowed) >= size or quiet:
        return allowed[-1][0]
    return None


def ends_session(period_end: datetime | None, next_start: datetime | None, gap: timedelta) -> bool:
    """Whether a summary ending at ``period_end`` ends a session: the next summary's first
    message (``next_start``) came more than ``gap`` later. Unknown dates end nothing."""
    if period_end is None or next_start is None:
        return False
    return next_start - period_end > gap


Span = tuple[datetime | None, datetime | None]
"""A summary's ``(period_start, period_end)``: when its first and last messages were written."""


def _boundaries(spans: Sequence[Span], gap: timedelta) -> list[bool]:
    """``[i]``: whether a session ends between summary ``i`` and ``i + 1``."""
    return [ends_session(a[1], b[0], gap) for a, b in itertools.pairwise(spans)]


def session_groups(spans: Sequence[Span], gap: timedelta) -> list[tuple[int, int]]:
    """The sessions a run of consecutive summaries (oldest first) completes in two or more
    of them, to be merged into one summary each: index ranges ``[start, stop)`` between two
    session ends (the first may start at the first summary), the end confirmed by the next
    summary starting more than ``gap`` later. The newest session is never complete here:
    nothing follows it yet."""
    groups: list[tuple[int, int]] = []
    start = 0
    for i, ends in enumerate(_boundaries(spans, gap)):
        if ends:
            if i + 1 - start >= 2:
                groups.append((start, i + 1))
            start = i + 1
    return groups


def merge_run(spans: Sequence[Span], keep: int, gap: timedelta) -> tuple[int, int]:
    """Which consecutive summaries (index range ``[start, stop)``) to merge so that at most
    ``keep`` of ``spans`` (more than ``keep``, oldest first) remain, splitting no session where
    that can be done: the oldest ones up to the first session end that leaves at most
    ``keep``; else the oldest run of just enough within one session (the newest left out);
    else just enough of the oldest."""
    least = len(spans) - keep + 1
    ends = _boundaries(spans, gap)
    for stop in range(least, len(spans)):
        if ends[stop - 1]:
            return 0, stop
    for start in range(len(spans) - least):
        if not any(ends[start : start + least - 1]):
            return start, start + least
    return 0, least
