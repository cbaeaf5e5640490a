"""Head-and-tail and head-only truncation: exact under the counter, visible, multi-byte safe,
never splitting a combining sequence or a flag."""

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


def _regional(ch: str) -> bool:
    return "\U0001f1e6" <= ch <= "\U0001f1ff"


def _clean_cut(text: str, i: int) -> bool:
    """A cut at i does not put a combining mark or joiner at the start of the next part, nor
    split a CRLF or a flag (regional indicators pair from the start of their run)."""
    if i <= 0 or i >= len(text):
        return True
    ch = text[i]
    if _regional(ch) and _regional(text[i - 1]):
        run = len(text[:i]) - len(text[:i].rstrip("".join(map(chr, range(0x1F1E6, 0x1F200)))))
        return run % 2 == 0
    return not (
        unicodedata.combining(ch)
        or ch in "\u200d\ufe0f"
        or text[i - 1] == "\u200d"
        or text[i - 1 : i + 1] == "\r\n"
    )


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


#: Characters of sequences a cut keeps whole (a combining accent, the zero-width joiner, an
#: emoji variation selector, a skin tone, CR before LF, regional indicators that pair into
#: flags wherever a run of them starts), among letters, spaces and emoji.
ALPHABET = [
    "a",
    "я",
    "你",
    " ",
    "\n",
    "\r",
    "\u0301",
    "\u200d",
    "\ufe0f",
    "\U0001f3fd",
    "👨",
    "👍",
    "\U0001f1fa",  # U
    "\U0001f1e6",  # A
    "\U0001f1f5",  # P
    "\U0001f1f1",  # L
]
#: Flags in runs: 🇺🇦🇵🇱🇩🇪🇯🇵🇫🇷 is ten regional indicators, five flags.
FLAGS = "Flags: 🇺🇦🇵🇱🇩🇪🇯🇵🇫🇷 and more. "


def _cut_points(text: str, cut_text: str, keep_tail: bool) -> list[int]:
    """Where a cut of ``text`` (its ``cut_text``) ended its head and started its tail."""
    if not keep_tail:
        return [len(cut_text.rpartition("\n")[0])]
    head, _, rest = ("\n" + cut_text).partition("\n[… ")
    tail = rest.partition(" tokens omitted …]")[2].removeprefix("\n")
    return [len(head.removeprefix("\n")), len(text) - len(tail)]


@settings(max_examples=80, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(ALPHABET), min_size=20, max_size=400),
    limit=st.integers(20, 120),
)
# Both cuts once ended the head (the middle cut also started the tail) between the halves of
# a flag, leaving half a flag on each side of the marker.
@example(text=FLAGS * 6, limit=20)
@example(text=(_CJK + "🇺🇦🇵🇱🇩🇪 ") * 4, limit=25)
def test_cuts_never_split_a_sequence(text: str, limit: int) -> None:
    for fn, keep_tail in ((truncate_middle, True), (truncate_tail, False)):
        cut = fn(text, limit, COUNTER)
        assert cut.tokens == COUNTER.count(cut.text) <= limit
        if cut.truncated and "tokens omitted …]" in cut.text:
            for i in _cut_points(text, cut.text, keep_tail):
                assert _clean_cut(text, i), (fn.__name__, i, text[max(0, i - 3) : i + 3])


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
