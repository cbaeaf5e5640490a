"""What the context assembly put into a prompt, in a form a provider (or a person) can read.

The assembly fills one :class:`ContextReport` per turn; the offline provider reads it back to
the user, so a deployment without a model still shows the context management at work.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ContextSection:
    """One section of the prompt: ``name`` (system, facts, summaries, retrieval, history...),
    the tokens it took, how many items it holds, and how many were left out by the budget."""

    name: str
    tokens: int
    items: int = 0
    dropped: int = 0


@dataclass(frozen=True)
class ContextReport:
    """Sections in prompt order, the facts and retrieved turns seen, and the budget.

    ``retrieved`` holds short previews of older turns retrieved as relevant; ``counter`` is
    the stable name of the token counter that produced the numbers.
    """

    sections: tuple[ContextSection, ...] = ()
    facts: tuple[str, ...] = ()
    retrieved: tuple[str, ...] = ()
    budget_tokens: int | None = None
    counter: str = ""
    strategy: str = ""
    #: The whole prompt's tokens as the platform counted them with ``counter``.
    prompt_tokens: int | None = None

    @property
    def total_tokens(self) -> int:
        return sum(section.tokens for section in self.sections)
