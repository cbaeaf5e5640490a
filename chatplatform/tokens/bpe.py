"""Exact counters for public BPE encodings, offline (vocabularies ship with ``bpe-openai``)."""

from __future__ import annotations

import functools
from typing import Any

from .base import CounterNotAvailable, TokenCounter

PUBLIC_ENCODINGS = ("o200k_base", "cl100k_base")


@functools.cache
def _load_encoding(encoding_name: str) -> Any:
    try:
        import bpe_openai
    except ImportError as exc:  # pragma: no cover - dependency is pinned in base.txt
        raise CounterNotAvailable("bpe-openai is not installed") from exc
    return bpe_openai.get_encoding(encoding_name)


class BpeCounter(TokenCounter):
    """Exact count with a public OpenAI encoding (``o200k_base``, ``cl100k_base``).

    OpenAI chat framing costs 3 tokens per message (``<|start|>role<|message|>...<|end|>``),
    plus 3 for the reply primer, which the assembly accounts for once per prompt.
    """

    exact = True
    message_overhead = 4

    def __init__(self, encoding_name: str) -> None:
        if encoding_name not in PUBLIC_ENCODINGS:
            raise CounterNotAvailable(f"unknown public encoding {encoding_name!r}")
        self.name = encoding_name
        self._encoding = _load_encoding(encoding_name)

    def count(self, text: str) -> int:
        if not text:
            return 0
        # disallowed_special=() counts text like "<|endoftext|>" as plain text instead of raising
        return len(self._encoding.encode(text, disallowed_special=()))
