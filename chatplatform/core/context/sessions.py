"""Conversation sessions: runs of messages with no pause longer than a gap between them.

A rolling summary covers part of one session at most: its chunk of messages ends at the last
message before a pause longer than the gap, even when that leaves it shorter than the
policy's interval, once the pause is over (a later message came, or the conversation has
been quiet for longer than the gap); a session longer than the interval still splits by the
interval. Merges of summaries take whole sessions where they can
(:func:`ends_session`). Pure: the caller fetches the few rows these look at.
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
