"""Head-and-tail and head-only truncation: exact under the counter, visible, multi-byte safe."""

from __future__ import annotations

import unicodedata

from hypothesis import example, given, settings
from hypothesis import strategies as st

from chatplatform.core.context.truncate import (
    count_text,
    marker_text,
    truncate_middle,
    truncate_tail,
)

from .helpers import COUNTER, SNIPPETS

long_texts = st.tuples(
    st.lists(st.sampled_from(SNIPPETS), min_size=1, max_size=8).map("".join),
    st.integers(1, 400),
).map(lambda t: t[0] * t[1])


def _clean_cut(text: str, i: int) -> bool:
    """A cut at i does not put a combining mark or joiner at the start of the next part."""
    if i <= 0 or i >= len(text):
        return True
    ch = text[i]
    return not (unicodedata.combining(ch) or ch in "\u200d\ufe0f" or text[i - 1] == "\u200d")


#: What a cut of these texts may leave unused: the largest piece it cannot split (a ZWJ family
#: emoji counts 8 tokens, 9 with its space) and a token the join merges. A side that stops
#: before such a piece gives its room to the other side, so more left over is a short cut.
ROOM_LEFT = 12

_CJK = "你好，世界。我们今天讨论上下文管理。"
_EMOJI = "👨\u200d👩\u200d👧 🎉👍🏽 🇺🇦 "


@settings(max_examples=60, deadline=None)
@given(text=long_texts, limit=st.integers(0, 600))
# Each side stopped before a family emoji and kept its half's room unused (86 of 100, 254 of
# 270 tokens); the head and the tail now take the room the other left.
@example(text=(_CJK + _EMOJI) * 4, limit=100)
@example(text=(_CJK * 2 + _EMOJI + _CJK) * 6, limit=270)
def test_middle_cut_fits_exactly_and_keeps_head_and_tail(text: str, limit: int) -> None:
    total = COUNTER.count(text)
    cut = truncate_middle(text, limit, COUNTER)
    assert cut.tokens == COUNTER.count(cut.text) <= limit
    assert cut.original_tokens == total
    if total <= limit:
        assert cut.text == text and not cut.truncated
        return
    assert cut.truncated
    if limit >= 20:
        assert "tokens omitted …]" in cut.text
        head, _, rest = ("\n" + cut.text).partition("\n[… ")
        head = head.removeprefix("\n")
        tail = rest.partition(" tokens omitted …]")[2].removeprefix("\n")
        assert text.startswith(head) and text.endswith(tail)
        assert _clean_cut(text, len(head)) and _clean_cut(text, len(text) - len(tail))
    if limit >= 100:
        assert cut.tokens >= limit - ROOM_LEFT  # uses the room, not just "fits"


@settings(max_examples=40, deadline=None)
@given(text=long_texts, limit=st.integers(0, 400))
def test_tail_cut_keeps_the_head(text: str, limit: int) -> None:
    cut = truncate_tail(text, limit, COUNTER)
    assert cut.tokens == COUNTER.count(cut.text) <= limit
    if cut.truncated and limit >= 20:
        head, _, marker = cut.text.rpartition("\n")
        assert text.startswith(head) and marker.endswith("tokens omitted …]")
    if cut.truncated and limit >= 100:
        assert cut.tokens >= limit - ROOM_LEFT


@settings(max_examples=40, deadline=None)
@given(text=st.text(min_size=1, max_size=300), limit=st.integers(0, 60))
def test_arbitrary_unicode_never_overflows(text: str, limit: int) -> None:
    for fn in (truncate_middle, truncate_tail):
        cut = fn(text, limit, COUNTER)
        assert COUNTER.count(cut.text) <= limit


def test_marker_reports_omitted_tokens() -> None:
    text = "alpha " * 1_000
    cut = truncate_middle(text, 50, COUNTER)
    kept = COUNTER.count(cut.text) - COUNTER.count(marker_text(1))
    omitted = int(cut.text.split("[… ")[1].split(" ")[0])
    assert abs(omitted - (COUNTER.count(text) - kept)) <= 6


def test_stale_total_is_trusted_only_to_skip_work() -> None:
    cut = truncate_middle("word " * 500, 100, COUNTER, total_tokens=10_000)
    assert cut.truncated and COUNTER.count(cut.text) <= 100


def test_tiny_budgets_fall_back_to_short_markers() -> None:
    text = "Привет " * 500
    assert truncate_middle(text, 0, COUNTER).text == ""
    assert truncate_middle(text, 2, COUNTER).text == "[…]"


def test_counts_text_longer_than_the_counter_accepts() -> None:
    text = "hello world " * 100_000  # 1.2M characters: bpe-openai refuses it whole
    assert abs(count_text(COUNTER, text) - 2 * 100_000) <= 50  # counted in chunks
