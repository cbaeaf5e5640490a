"""Cutting one text to fit N tokens exactly under a counter, with a visible marker.

``truncate_middle`` keeps the head and the tail (for an over-long message);
``truncate_tail`` keeps the head (for a section: the system prompt, a summary). Both return
text whose count under the counter is ``<= max_tokens``: cut points are found by a bracketed
binary search on character positions using the counter itself, then the joined result is
recounted and the cut shrunk until it fits, then grown into the room it left (what one side
could not use goes to the other), so a cut is not needlessly shorter than ``max_tokens``.
Cuts never split a combining sequence (combining marks, ZWJ emoji sequences, variation
selectors, skin-tone modifiers, CRLF) nor a flag (a pair of regional indicator symbols, the
pairs counted from the start of a run of them, as Unicode's grapheme rules pair them).

Work is proportional to the kept text (``O(kept * log(kept))`` characters counted), plus one
count of the whole text when its token count is not given.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from chatplatform.core.tokens.base import TokenCounter


MARKER = "[… {n} tokens omitted …]"
SHORT_MARKER = "[…]"
_MAX_SNAP = 16
_MAX_ROUNDS = 8
#: Rounds that grow a fitting cut's head and tail into the room it left.
_GROW_ROUNDS = 3
#: Room (tokens) a fitting cut is not grown into: each growth recounts the joined cut, which
#: doubled a 2,000-token cut's time for the last token or two.
_GROW_MIN_ROOM = 3
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


#: The regional indicator symbols (U+1F1E6..U+1F1FF): a flag is a pair of them.
REGIONAL_INDICATORS = "".join(map(chr, range(0x1F1E6, 0x1F200)))
_RI_FIRST, _RI_LAST = 0x1F1E6, 0x1F1FF


def _indicators_before(text: str, i: int) -> int:
    """How many regional indicators end the text before ``i`` (its run's length so far):
    looked at in growing windows, each stripped in C, so the work follows the run."""
    width = 16
    while True:
        lo = max(0, i - width)
        run = i - lo - len(text[lo:i].rstrip(REGIONAL_INDICATORS))
        if run < i - lo or lo == 0:
            return run
        width *= 4


def _joins(text: str, i: int) -> bool:
    """Whether a cut at ``i`` would split a grapheme-like sequence."""
    if i <= 0 or i >= len(text):
        return False
    ch, prev = text[i], text[i - 1]
    if _RI_FIRST <= ord(ch) <= _RI_LAST and _RI_FIRST <= ord(prev) <= _RI_LAST:
        return _indicators_before(text, i) % 2 == 1  # between the halves of a flag
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


def _search(
    count: Callable[[int], int], size: int, max_tokens: int, fits: tuple[int, int], step: int
) -> tuple[int, int]:
    """Largest ``n <= size`` (approximately: counts are not quite monotonic in length) with
    ``count(n) <= max_tokens``, and its count. ``fits`` is a length known to fit and its count:
    the search starts ``step`` characters above it and grows until too long (or ``size``), then
    bisects."""
    base = fits[0]
    lo, lo_tokens = fits
    hi = min(size, base + max(8, step))
    if hi <= lo:
        return fits
    while (tokens := count(hi)) <= max_tokens:
        lo, lo_tokens = hi, tokens
        if hi == size:
            return hi, tokens
        hi = min(size, hi + max(8, (hi - base) // 4))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if (tokens := count(mid)) <= max_tokens:
            lo, lo_tokens = mid, tokens
        else:
            hi = mid
    return lo, lo_tokens


def _clean_length(text: str, n: int, suffix: bool) -> int:
    """The longest prefix (suffix) of at most ``n`` characters that ends (starts) at a clean
    cut, where no combining sequence is split."""
    size = len(text)
    return size - _snap(text, size - n, +1) if suffix else max(0, _snap(text, n, -1))


def _longest(
    text: str, max_tokens: int, counter: TokenCounter, chars_per_token: float, suffix: bool
) -> tuple[int, int]:
    """Largest length (approximately) of a prefix/suffix that counts ``<= max_tokens``, moved
    back to a clean cut, and its count."""
    size = len(text)
    if max_tokens <= 0 or size == 0:
        return 0, 0

    def count(n: int) -> int:
        return count_text(counter, text[size - n :] if suffix else text[:n])

    n, tokens = _search(count, size, max_tokens, (0, 0), int(max_tokens * chars_per_token))
    clean = _clean_length(text, n, suffix)
    return clean, tokens if clean == n else count(clean)


def _fallback(max_tokens: int, original: int, counter: TokenCounter) -> Cut:
    for candidate in (marker_text(original), SHORT_MARKER):
        n = count_text(counter, candidate)
        if n <= max_tokens:
            return Cut(candidate, n, original, True)
    return Cut("", 0, original, True)


@dataclass(frozen=True, slots=True)
class _Sides:
    """A cut's kept head ``text[:h]`` and tail ``text[start:]`` with their counts."""

    h: int
    head_tokens: int
    start: int
    tail_tokens: int


def _sides(
    text: str, head: tuple[int, int], tail: tuple[int, int], counter: TokenCounter
) -> _Sides:
    """The head and tail ``_longest`` found (lengths and counts); a tail that would overlap the
    head starts where the head ends (and is recounted)."""
    (h, head_tokens), (n, tail_tokens) = head, tail
    start = len(text) - n
    if start < h:
        start = h
        tail_tokens = count_text(counter, text[start:])
    return _Sides(h, head_tokens, start, tail_tokens)


def _joined(text: str, sides: _Sides, original: int, counter: TokenCounter) -> Cut:
    """The head, the marker and the tail on lines of their own, counted."""
    head, tail = text[: sides.h], text[sides.start :]
    omitted = max(1, original - sides.head_tokens - sides.tail_tokens)
    out = "\n".join(part for part in (head, marker_text(omitted), tail) if part)
    return Cut(out, count_text(counter, out), original, True)


def _cut(
    text: str, max_tokens: int, counter: TokenCounter, total: int | None, keep_tail: bool
) -> Cut:
    max_tokens = max(0, max_tokens)
    original = count_text(counter, text) if total is None else total
    if original <= max_tokens:
        return Cut(text, original, original, False)
    cpt = len(text) / max(1, original)  # characters per token
    marker_cost = count_text(counter, marker_text(original)) + 2  # plus the joining newlines
    avail = max_tokens - marker_cost
    tail_budget = avail // 2 if keep_tail else 0
    head_budget = avail - tail_budget
    for _ in range(_MAX_ROUNDS):
        if head_budget + tail_budget <= 0:
            break
        head = _longest(text, head_budget, counter, cpt, False)
        tail = _longest(text, tail_budget, counter, cpt, True) if tail_budget > 0 else (0, 0)
        sides = _sides(text, head, tail, counter)
        cut = _joined(text, sides, original, counter)
        if cut.tokens <= max_tokens:
            return _spend_room(text, cut, sides, max_tokens, counter, cpt, keep_tail)
        over = cut.tokens - max_tokens  # shrink both shares by what went over
        if keep_tail:
            tail_budget = max(0, tail_budget - (over + 1) // 2 - 1)
            head_budget = max(0, head_budget - (over + 1) // 2 - 1)
        else:
            head_budget = max(0, head_budget - over - 1)
    return _fallback(max_tokens, original, counter)


def _spend_room(
    text: str,
    cut: Cut,
    sides: _Sides,
    max_tokens: int,
    counter: TokenCounter,
    cpt: float,
    keep_tail: bool,
) -> Cut:
    """``cut`` grown into the room it leaves, so that it is not needlessly short.

    Each side was searched for its own share, so the room one side could not use (its next
    token, or a whole emoji sequence, did not fit) and what the joins merged are left over.
    The head, then the tail, grows to the longest that keeps the whole cut within
    ``max_tokens``, again while either grows."""
    for _ in range(_GROW_ROUNDS):
        grew = False
        for suffix in (False, True) if keep_tail else (False,):
            if max_tokens - cut.tokens <= _GROW_MIN_ROOM:
                return cut
            grown_sides = _grown(text, cut, sides, max_tokens, counter, cpt, suffix)
            if grown_sides is None:
                continue
            grown = _joined(text, grown_sides, cut.original_tokens, counter)
            if cut.tokens < grown.tokens <= max_tokens:
                cut, sides, grew = grown, grown_sides, True
        if not grew:
            break
    return cut


def _grown(
    text: str,
    cut: Cut,
    sides: _Sides,
    max_tokens: int,
    counter: TokenCounter,
    cpt: float,
    suffix: bool,
) -> _Sides | None:
    """The head (or the tail) of ``cut`` as long as the whole cut can be within
    ``max_tokens``, the other side kept; ``None`` when it cannot grow. Searched on the joined
    text with the current marker, whose count can only fall as the omitted count does."""
    size = len(text)
    head, tail = text[: sides.h], text[sides.start :]
    omitted = max(1, cut.original_tokens - sides.head_tokens - sides.tail_tokens)
    marker = marker_text(omitted)
    step = int((max_tokens - cut.tokens) * cpt)
    if suffix:
        before = "\n".join(part for part in (head, marker) if part) + "\n"
        n, _ = _search(
            lambda n: count_text(counter, before + text[size - n :]),
            size - sides.h,
            max_tokens,
            (size - sides.start, cut.tokens),
            step,
        )
        n = _clean_length(text, n, True)
        if n <= size - sides.start:
            return None
        return _Sides(sides.h, sides.head_tokens, size - n, count_text(counter, text[size - n :]))
    after = "\n" + "\n".join(part for part in (marker, tail) if part)
    n, _ = _search(
        lambda n: count_text(counter, text[:n] + after),
        sides.start,
        max_tokens,
        (sides.h, cut.tokens),
        step,
    )
    n = _clean_length(text, n, False)
    if n <= sides.h:
        return None
    return _Sides(n, count_text(counter, text[:n]), sides.start, sides.tail_tokens)


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
