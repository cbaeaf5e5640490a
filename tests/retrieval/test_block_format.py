"""The retrieved block: one time stamp per run of same-minute lines, exact accounting."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from chatplatform.core.context.formatting import RETRIEVED_NOTE, retrieved_line
from chatplatform.core.context.meter import Meter
from chatplatform.core.context.sections import pick_retrieved
from chatplatform.core.context.types import MessageItem, RetrievedItem
from chatplatform.core.tokens import get_counter

START = datetime(2023, 5, 8, 13, 56)


def msg(seq, minute, text="hello there", author="Caroline"):
    return MessageItem(
        seq, seq, "user", text, author=author, created_at=START + timedelta(minutes=minute)
    )


def test_a_line_sent_in_the_same_minute_as_the_line_above_has_no_stamp():
    first, second = msg(1, 0), msg(2, 0, author="Melanie")
    assert retrieved_line(first, "Bot", None) == "[2023-05-08 13:56] Caroline: hello there"
    assert retrieved_line(second, "Bot", first) == "Melanie: hello there"
    assert retrieved_line(msg(3, 1), "Bot", second).startswith("[2023-05-08 13:57] ")
    assert "time of the line above" in RETRIEVED_NOTE


def test_block_stamps_each_run_once_and_marks_gaps():
    counter = get_counter("o200k_base")
    items = [RetrievedItem(m, 1.0) for m in (msg(1, 0), msg(2, 0), msg(5, 0), msg(6, 9))]
    out = pick_retrieved(items, 10_000, 10, 0, set(), Meter(counter, 3), "Bot", [])
    lines = out.render("Bot").split("\n")[2:-1]
    assert lines == [
        "[2023-05-08 13:56] Caroline: hello there",
        "Caroline: hello there",
        "…",
        "Caroline: hello there",
        "[2023-05-08 14:05] Caroline: hello there",
    ]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 40), st.integers(0, 3), st.sampled_from(["a b", "x — y z", ""])),
        min_size=1,
        max_size=25,
    ),
    st.integers(0, 400),
)
def test_accounted_tokens_cover_the_rendered_block_and_respect_the_cap(specs, cap):
    """Whatever the order of picks (runs merge, gaps open and close), the block costs at most
    what is accounted, and the accounting stays within the cap."""
    counter = get_counter("o200k_base")
    items = [RetrievedItem(msg(seq, minute, text or "ok"), 1.0) for seq, minute, text in specs]
    out = pick_retrieved(items, cap, 50, 0, set(), Meter(counter, 3), "Bot", [])
    if not out.entries:
        return
    block = out.render("Bot")
    assert counter.count(block) + 1 <= out.used <= cap  # +1: the block separator
    assert sum(i.tokens for i in out.included()) + out.frame == out.used
