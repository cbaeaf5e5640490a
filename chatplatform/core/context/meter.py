"""Counting with one counter: what it trusts, what it recounts, and what it remembers.

A stored count is trusted when this counter made it; any other text is counted, at most once
per process while turns keep sending it (:class:`CountMemo`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .truncate import count_text
from .types import Included, ItemId

if TYPE_CHECKING:
    from chatplatform.core.tokens.base import TokenCounter


#: Texts longer than this are not remembered across assemblies (a pasted book would crowd out
#: whole conversations, and it is truncated each turn anyway).
MEMO_MAX_TEXT_CHARS = 100_000
#: Characters of text remembered per counter (about 8-32 MB of strings).
MEMO_MAX_TOTAL_CHARS = 8_000_000


class CountMemo:
    """Counts one counter made in this process, keyed by the exact text, bounded by total
    characters (at most ``max_chars``). Thread-safe.

    Why: consecutive turns of a conversation send almost the same history, and a WebSocket
    keeps a conversation in one process, so the final recount of a turn re-tokenizes texts
    the previous turn already tokenized. Only counts *made by the counter* are remembered;
    stored counts read from the database never are (they are claims: the final recount
    exists to catch the ones that lie).

    Two generations instead of a least-recently-used order: a hit in the young one costs a
    plain dict read (no bookkeeping per hit, hundreds per turn); when the young generation
    fills half the bound it becomes the old one (the previous old one is dropped), and a hit
    in the old generation moves the text back to the young one. So what the recent turns
    used survives, and what no turn asked for during a whole generation goes.
    """

    def __init__(self, max_chars: int = MEMO_MAX_TOTAL_CHARS) -> None:
        self.max_chars = max_chars
        self._young: dict[str, int] = {}
        self._old: dict[str, int] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, text: str) -> int | None:
        # Reads take no lock: a dict read is atomic, and a read racing a generation swap can
        # only miss (the caller then counts, which is always correct).
        n = self._young.get(text)
        if n is None:
            n = self._old.get(text)
            if n is not None:
                self.put(text, n)
        return n

    def get_many(self, texts: Iterable[str]) -> tuple[int, list[str]]:
        """The sum of the remembered counts among ``texts``, and the texts not remembered."""
        texts = list(texts)
        # All in the young generation (every turn but the first of a conversation in this
        # process, as a rule): one C-level pass.
        found = list(map(self._young.get, texts))
        if None not in found:
            return sum(found), []  # type: ignore[arg-type]  # no None in found
        total = 0
        missing: list[str] = []
        for text, n in zip(texts, found, strict=True):
            if n is None:
                n = self.get(text)
            if n is None:
                missing.append(text)
            else:
                total += n
        return total, missing

    def put(self, text: str, n: int) -> None:
        chars = len(text)
        if chars > MEMO_MAX_TEXT_CHARS:
            return
        with self._lock:
            if text in self._young:
                return
            if self._chars + chars > self.max_chars // 2:
                self._old, self._young, self._chars = self._young, {}, 0
            self._young[text] = n
            self._chars += chars

    def clear(self) -> None:
        with self._lock:
            self._young, self._old, self._chars = {}, {}, 0


_memos: weakref.WeakKeyDictionary[TokenCounter, CountMemo] = weakref.WeakKeyDictionary()
_memos_lock = threading.Lock()


def count_memo(counter: TokenCounter) -> CountMemo:
    """The process-wide memo of ``counter`` (one per counter object: two objects with the
    same name, e.g. test doubles, never share counts)."""
    memo = _memos.get(counter)
    if memo is None:
        with _memos_lock:
            memo = _memos.get(counter)
            if memo is None:
                memo = _memos[counter] = CountMemo()
    return memo


class Meter:
    """Counts with one counter; trusts stored counts made by it and records the others.

    ``text`` tokenizes a text at most once per process (see :class:`CountMemo`), so the
    final recount of the prompt costs tokenization only for texts new since the previous
    turns.
    """

    def __init__(self, counter: TokenCounter, overhead: int) -> None:
        self.counter = counter
        self.overhead = overhead
        self.recounted: list[Included] = []
        self._recounted: set[tuple[str, ItemId]] = set()
        self._small: dict[str, int] = {}
        self._memo = count_memo(counter)
        #: Tokens of retrieved lines already priced in this assembly, by item and speaker
        #: (``sections._line_tokens``).
        self.lines: dict[tuple[object, str], int] = {}

    def text(self, text: str) -> int:
        known = self._memo.get(text)
        if known is not None:
            return known
        n = count_text(self.counter, text)
        self._memo.put(text, n)
        return n

    def texts(self, texts: Iterable[str]) -> int:
        """The sum of ``text`` over ``texts`` (one lock round for the memo hits)."""
        total, missing = self._memo.get_many(texts)
        for text in missing:
            total += self.text(text)
        return total

    def small(self, text: str) -> int:
        """Count of a short, often repeated string (prefixes, frames), cached."""
        n = self._small.get(text)
        if n is None:
            if len(self._small) > 4096:
                self._small.clear()
            n = self._small[text] = self.text(text)
        return n

    def stored(
        self, kind: str, item_id: ItemId, text: str, tokens: int | None, counted_by: str | None
    ) -> int:
        """The item's stored count if this counter made it, else a fresh count, recorded
        once per item however often the packing asks for it."""
        if tokens is not None and tokens >= 0 and counted_by in (None, self.counter.name):
            return tokens
        n = self.text(text)
        if (kind, item_id) not in self._recounted:
            self._recounted.add((kind, item_id))
            self.recounted.append(Included(kind, item_id, n))
        return n
