"""What the context assembly put into a prompt, in a form a provider (or a person) can read.

The assembly fills one :class:`ContextReport` per turn from the same assembled prompt the
turn record stores; the offline provider reads it back to the user, so a deployment without
a model still shows the context management at work, in the same terms as the context meter
(which sections, what each held, what was left out and why). Messages are named by their
number in the conversation (the ``#n`` the chat shows), never by a database id.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Why an item was left out of a prompt, in words, by the reason the packing records (see
#: ``chatplatform.core.context.types.Excluded``); the context meter shows the same words.
EXCLUSION_REASONS = {
    "over_budget": "did not fit the budget",
    "window_trim": "trimmed with the window so later turns reuse the cache",
    "duplicate": "duplicate of an item already included",
    "cap": "over a count limit of the policy",
    "outside_window": "already covered by a summary",
    "incomplete_tool_group": "tool call without its result",
    "empty": "empty",
    "strategy": "not used by this strategy",
    "recount": "shed by the final recount",
}

#: The section of the prompt each kind of item belongs to.
SECTION_OF_KIND = {
    "message": "history",
    "retrieved": "retrieval",
    "fact": "facts",
    "instruction": "instructions",
    "summary": "summaries",
}


def exclusion_label(reason: str) -> str:
    return EXCLUSION_REASONS.get(reason, reason.replace("_", " "))


@dataclass(frozen=True)
class ContextSection:
    """One section of the prompt: ``name`` (system, facts, summaries, retrieval, history...),
    the tokens it took, how many items it holds, and how many were left out by the packing."""

    name: str
    tokens: int
    items: int = 0
    dropped: int = 0


@dataclass(frozen=True)
class PromptMessage:
    """A message of the conversation the prompt holds: ``seq`` is its number in the
    conversation, ``speaker`` who wrote it (a name, or the role), ``excerpt`` its start."""

    seq: int
    speaker: str
    excerpt: str


@dataclass(frozen=True)
class PromptSummary:
    """A summary the prompt holds: its kind (rolling, recent, long, carried) and the
    messages it covers (for ``carried``, those of the earlier conversation)."""

    kind: str
    first_seq: int
    last_seq: int


@dataclass(frozen=True)
class LeftOut:
    """How many items of one kind (message, retrieved, fact, summary) were left out for
    one reason (a key of :data:`EXCLUSION_REASONS`)."""

    kind: str
    reason: str
    count: int


@dataclass(frozen=True)
class ContextReport:
    """Sections in prompt order, what they held, what was left out, and the budget.

    ``history`` is the first and last ``seq`` of the recent messages sent verbatim (``None``
    when none were); ``retrieved`` the older messages sent because retrieval found them
    relevant (or the cached window recalled them); ``facts`` short previews of the facts
    sent. ``counter`` is the stable name of the token counter that produced the numbers.
    """

    sections: tuple[ContextSection, ...] = ()
    facts: tuple[str, ...] = ()
    summaries: tuple[PromptSummary, ...] = ()
    retrieved: tuple[PromptMessage, ...] = ()
    history: tuple[int, int] | None = None
    left_out: tuple[LeftOut, ...] = ()
    budget_tokens: int | None = None
    counter: str = ""
    strategy: str = ""
    #: The whole prompt's tokens as the platform counted them with ``counter``.
    prompt_tokens: int | None = None

    @property
    def total_tokens(self) -> int:
        return sum(section.tokens for section in self.sections)

    def section(self, name: str) -> ContextSection | None:
        return next((s for s in self.sections if s.name == name), None)
