"""Exact counters for public BPE encodings, offline (vocabularies ship with ``bpe-openai``)."""

from __future__ import annotations

import functools
from typing import Any

from .base import CounterNotAvailable, TokenCounter

PUBLIC_ENCODINGS = ("o200k_base", "cl100k_base")

#: Texts longer than this are counted in pieces split at whitespace: the library refuses
#: inputs of 1,000,000 characters or 200,000 tokens and more.
CHUNK_CHARS = 100_000


@functools.cache
def load_encoding(encoding_name: str) -> Any:
    try:
        import bpe_openai
    except ImportError as exc:  # pragma: no cover - dependency is pinned in base.txt
        raise CounterNotAvailable("bpe-openai is not installed") from exc
    return bpe_openai.get_encoding(encoding_name)


def _chunks(text: str) -> list[str]:
    pieces = []
    start = 0
    while len(text) - start > CHUNK_CHARS:
        end = start + CHUNK_CHARS
        cut = text.rfind(" ", start + CHUNK_CHARS // 2, end)
        end = cut if cut > start else end
        pieces.append(text[start:end])
        start = end
    pieces.append(text[start:])
    return pieces


class BpeCounter(TokenCounter):
    """Exact count with a public OpenAI encoding (``o200k_base``, ``cl100k_base``).

    Special-token text such as ``<|endoftext|>`` counts as plain text (as a chat API does).
    Unpaired surrogates are replaced before encoding, as the tokenizer library does. A text
    longer than :data:`CHUNK_CHARS` is counted in whitespace-split pieces plus one token per
    split, so the count never falls below the exact one by a merge across a split.
    Chat framing costs ``message_overhead`` tokens per message.
    """

    exact = True
    message_overhead = 4

    def __init__(self, encoding_name: str) -> None:
        if encoding_name not in PUBLIC_ENCODINGS:
            raise CounterNotAvailable(f"unknown public encoding {encoding_name!r}")
        self.name = encoding_name
        self._encoding = load_encoding(encoding_name)
        # The native tokenizer directly: the library's Python wrapper costs more per call
        # than counting a chat message does.
        self._native = getattr(self._encoding, "_backend", None)

    def _count_piece(self, text: str) -> int:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        if self._native is not None:
            return len(self._native.encode(text))
        return len(self._encoding.encode(text, disallowed_special=()))

    def count(self, text: str) -> int:
        if not text:
            return 0
        if len(text) <= CHUNK_CHARS:
            return self._count_piece(text)
        pieces = _chunks(text)
        return sum(self._count_piece(p) for p in pieces) + len(pieces) - 1
