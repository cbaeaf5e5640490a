"""The one token-counting interface every part of the platform uses."""

from __future__ import annotations

from abc import ABC, abstractmethod


class CounterNotAvailable(RuntimeError):
    """Raised when a counter cannot count right now (e.g. its API is unreachable)."""


class TokenCounter(ABC):
    """Counts tokens of text for one tokenizer.

    Contract:
    - ``name`` is stable across releases; it is stored beside every stored count, so a count
      made by another counter than the one a policy's model uses can be recognised.
    - ``count(text)`` >= 0, and ``count("") == 0``.
    - ``count_message(role, content)`` = ``count(content) + message_overhead``: the provider's
      fixed per-message framing (role markers, separators). Counts of several messages add up.
    - ``exact`` says whether counts equal what the provider bills (True for a public BPE
      used by the same model, or the provider's own counting API).
    """

    name: str = "abstract"
    exact: bool = False
    message_overhead: int = 4

    @abstractmethod
    def count(self, text: str) -> int:
        """Return the number of tokens in ``text``."""

    def count_many(self, texts: list[str]) -> list[int]:
        """Count several texts; counters with batch APIs override this."""
        return [self.count(t) for t in texts]

    def count_message(self, role: str, content: str) -> int:
        """Tokens of one chat message including its per-message overhead."""
        return self.count(content) + self.message_overhead

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
