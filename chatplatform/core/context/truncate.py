"""Cutting one text to fit N tokens exactly under a counter, with a visible marker.

``truncate_middle`` keeps the head and the tail (for an over-long message);
``truncate_tail`` keeps the head (for a section: the system prompt, a summary). Both return
text whose count under the counter is ``<= max_tokens``: cut points are found by a bracketed
binary search on character positions using the counter itself, then the joined result is
recounted and the cut shrunk until it fits. Cuts never split a combining sequence (combining
marks, ZWJ emoji sequences, variation selectors, skin-tone modifiers, CRLF).

Work is proportional to the kept text (``O(kept * log(kept))`` characters counted), plus one
count of the whole text when its token count is not given.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chatplatform.core.tokens.base import TokenCounter


MARKER = "[… {n} tokens omitted …]"
SHORT_MARKER = "[…]"
_MAX_SNAP = 16
_MAX_ROUNDS = 8
#: Smallest room worth cutting a summary or history message into.
MIN_CUT_TOKENS = 48


#: Counters may refuse very long inputs (bpe-openai raises ValueError from 1,000,000 chars).
CHUNK_CHARS = 400_000


def count_text(counter: TokenCounter, text: str) -> int:
    """``counter.count(text)``; texts the counter refuses as too long are counted in chunks
    cut before a space or line break (where BPE pre-tokenisation splits anyway)."""
    try:
        return counter.count(text)
    except ValueError:
        if len(text) <= CHUNK_CHARS:
            raise
    total, start = 0, 0
    while start < len(text):
        end = min(len(text), start + CHUNK_CHARS)
        if end < len(text):
            cut = max(text.rfind(" ", start + 1, end), text.rfind("\n", start + 1, end))
            end = cut if cut > start else end
        total += counter.count(text[start:end])
        start = end
    return total


def marker_text(omitted: int) -> str:
    return MARKER.format(n=max(1, omitted))


@dataclass(frozen=True, slots=True)
class Cut:
    """A (possibly) truncated text; ``tokens`` is its exact count under the counter."""

    text: str
    tokens: int
    original_tokens: int
    truncated: bool


def _joins(text: str, i: int) -> bool:
    """Whether a cut at ``i`` would split a grapheme-like sequence."""
    if i <= 0 or i >= len(text):
        return False
    ch, prev = text[i], text[i - 1]
    if prev == "\u200d" or ch == "\u200d" or (prev == "\r" and ch == "\n"):
        return True
    code = ord(ch)
    if 0xFE00 <= code <= 0xFE0F or 0x1F3FB <= code <= 0x1F3FF or 0xE0020 <= code <= 0xE007F:
        return True
    return unicodedata.combining(ch) != 0 or unicodedata.category(ch) in ("Mn", "Me")


def _snap(text: str, i: int, step: int) -> int:
    for _ in range(_MAX_SNAP):
        if not _joins(text, i):
            return i
        i += step
    return i


def _fits_prefix(text: str, n: int, max_tokens: int, counter: TokenCounter) -> bool:
    return count_text(counter, text[:n]) <= max_tokens


def _fits_suffix(text: str, n: int, max_tokens: int, counter: TokenCounter) -> bool:
    return count_text(counter, text[len(text) - n :]) <= max_tokens


def _longest(
    text: str, max_tokens: int, counter: TokenCounter, chars_per_token: float, suffix: bool
) -> int:
    """Largest length ``n`` (approximately) whose prefix/suffix counts ``<= max_tokens``."""
    size = len(text)
    if max_tokens <= 0 or size == 0:
        return 0
    ok = _fits_suffix if suffix else _fits_prefix
    lo, hi = 0, min(size, max(8, int(max_tokens * chars_per_token)))
    while ok(text, hi, max_tokens, counter):  # grow until too long (or the whole text)
        lo = hi
        if hi == size:
            return size
        hi = min(size, max(hi + 8, int(hi * 1.25)))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(text, mid, max_tokens, counter):
            lo = mid
        else:
            hi = mid
    return lo


def _fallback(max_tokens: int, original: int, counter: TokenCounter) -> Cut:
    for candidate in (marker_text(original), SHORT_MARKER):
        n = count_text(counter, candidate)
        if n <= max_tokens:
            return Cut(candidate, n, original, True)
    return Cut("", 0, original, True)


def _cut(
    text: str, max_tokens: int, counter: TokenCounter, total: int | None, keep_tail: bool
) -> Cut:
    max_tokens = max(0, max_tokens)
    original = count_text(counter, text) if total is None else total
    if original <= max_tokens:
        return Cut(text, original, original, False)
    chars_per_token = len(text) / max(1, original)
    marker_cost = count_text(counter, marker_text(original)) + 2  # plus the joining newlines
    avail = max_tokens - marker_cost
    tail_budget = avail // 2 if keep_tail else 0
    head_budget = avail - tail_budget
    for _ in range(_MAX_ROUNDS):
        if head_budget + tail_budget <= 0:
            break
        h = _snap(text, _longest(text, head_budget, counter, chars_per_token, False), -1)
        start = len(text)
        if tail_budget > 0:
            n = _longest(text, tail_budget, counter, chars_per_token, True)
            start = _snap(text, max(h, len(text) - n), +1)
        head, tail = text[: max(0, h)], text[start:]
        omitted = max(1, original - count_text(counter, head) - count_text(counter, tail))
        out = "\n".join(part for part in (head, marker_text(omitted), tail) if part)
        used = count_text(counter, out)
        if used <= max_tokens:
            return Cut(out, used, original, True)
        over = used - max_tokens
        if keep_tail:
            tail_budget = max(0, tail_budget - (over + 1) // 2 - 1)
            head_budget = max(0, head_budget - (over + 1) // 2 - 1)
        else:
            head_budget = max(0, head_budget - over - 1)
    return _fallback(max_tokens, original, counter)


def truncate_middle(
    text: str, max_tokens: int, counter: TokenCounter, *, total_tokens: int | None = None
) -> Cut:
    """Keep head and tail around ``[… n tokens omitted …]`` so the result counts ``<=
    max_tokens``. ``total_tokens`` (the text's count, if known) saves one count; when it says
    the text fits, the text is returned unchanged."""
    return _cut(text, max_tokens, counter, total_tokens, keep_tail=True)


def truncate_tail(
    text: str, max_tokens: int, counter: TokenCounter, *, total_tokens: int | None = None
) -> Cut:
    """Keep the head and end with ``[… n tokens omitted …]``; result counts ``<= max_tokens``."""
    return _cut(text, max_tokens, counter, total_tokens, keep_tail=False)
