"""What turns cost against sending the whole history with prompt caching: the one place the
savings (or the extra cost) are computed and put in words. Pure: no Django.

Every surface that tells what the context policy saved (the chat page's meter, the admin's
usage pages, the REST API) builds a :class:`CostComparison` from the stored figures and shows
its numbers and sentences, so they all tell the same story: the bill first, beside what the
whole history would have cost sent *with* caching (never an uncached count), the difference
named plainly as saved or as extra (never a negative saving), and tokens second.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal, Protocol

Outcome = Literal["saved", "extra", "same", "unbilled"]

#: Costs are stored and shown to the micro-dollar (the cost columns' precision).
COST_QUANTUM = Decimal("0.000001")

#: What the meter and the admin say when the cache figures are the offline provider's.
SIMULATED_NOTE = (
    "Cache figures of turns answered by the offline provider are simulated: it reports what "
    "the priced model's prompt cache would have read and written for the same prompts."
)


def money(amount: Decimal) -> str:
    """Dollars for people: four decimals, six below a cent when they matter (``$0.0078``,
    ``$0.000312``), ``$0`` for nothing."""
    amount = Decimal(amount)
    if not amount:
        return "$0"
    if abs(amount) >= Decimal("0.01"):
        return f"${amount.quantize(Decimal('0.0001'))}"
    text = f"{amount.quantize(Decimal('0.000001')):f}"
    whole, _, decimals = text.partition(".")
    decimals = decimals.rstrip("0").ljust(4, "0")
    return f"${whole}.{decimals}"


def _number(n: int) -> str:
    return f"{n:,}"


class UsageSums(Protocol):
    """Summed usage of some turns (a day's, a policy's, the REST API's period)."""

    @property
    def turns(self) -> int: ...

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def cache_read_tokens(self) -> int: ...

    @property
    def cache_write_tokens(self) -> int: ...

    @property
    def hypothetical_tokens(self) -> int: ...

    @property
    def cost_usd(self) -> Decimal: ...

    @property
    def full_history_cost_usd(self) -> Decimal: ...

    @property
    def simulated_turns(self) -> int: ...


def comparison_of(usage: UsageSums) -> CostComparison:
    """The bill of ``usage`` against the whole history with caching, as every surface tells it."""
    return CostComparison(
        billed_usd=usage.cost_usd,
        whole_history_usd=usage.full_history_cost_usd,
        prompt_tokens=usage.prompt_tokens,
        whole_history_tokens=usage.hypothetical_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        turns=usage.turns,
        simulated=usage.simulated_turns > 0,
    )


@dataclass(frozen=True)
class CostComparison:
    """One turn's (or a sum of turns') bill beside the whole history sent with caching.

    ``billed_usd``: what the provider billed (prompt as cached, reply, compaction);
    ``whole_history_usd``: what sending the whole history every turn would have been billed,
    with a cache breakpoint on the newest message and the same reply. ``prompt_tokens`` and
    ``whole_history_tokens`` are the prompt sizes compared (the same counter's counts);
    ``cache_read_tokens``/``cache_write_tokens`` explain an extra cost. ``simulated``: the
    cache figures are the offline provider's simulation."""

    billed_usd: Decimal
    whole_history_usd: Decimal
    prompt_tokens: int = 0
    whole_history_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    turns: int = 1
    simulated: bool = False
    #: The prompt tokens the provider billed (cache reads and writes included), when they
    #: were counted by another counter than ``prompt_tokens``: the base of the cache share.
    billed_prompt_tokens: int | None = None

    @property
    def difference_usd(self) -> Decimal:
        """Whole history less the bill: positive when the policy saved."""
        return Decimal(self.whole_history_usd) - Decimal(self.billed_usd)

    @property
    def saved_usd(self) -> Decimal:
        """What the policy saved; zero when it cost more (never negative)."""
        return max(Decimal(0), self.difference_usd)

    @property
    def extra_usd(self) -> Decimal:
        """What the policy cost more than the whole history; zero when it saved."""
        return max(Decimal(0), -self.difference_usd)

    @property
    def saved_percent(self) -> float:
        whole = Decimal(self.whole_history_usd)
        return round(float(100 * self.saved_usd / whole), 1) if whole else 0.0

    @property
    def outcome(self) -> Outcome:
        if not self.billed_usd and not self.whole_history_usd:
            return "unbilled"
        if self.difference_usd > 0:
            return "saved"
        if self.difference_usd < 0:
            return "extra"
        return "same"

    @property
    def saved_tokens(self) -> int:
        return max(0, self.whole_history_tokens - self.prompt_tokens)

    @property
    def saved_tokens_percent(self) -> float:
        whole = self.whole_history_tokens
        return round(100.0 * self.saved_tokens / whole, 1) if whole else 0.0

    @property
    def cache_read_percent(self) -> float:
        """Share of the billed prompt read from the provider's cache."""
        base = (
            self.prompt_tokens if self.billed_prompt_tokens is None else self.billed_prompt_tokens
        )
        return round(100.0 * self.cache_read_tokens / base, 1) if base else 0.0

    @property
    def simulated_note(self) -> str:
        """What to say of simulated cache figures (empty for a provider's own)."""
        return SIMULATED_NOTE if self.simulated else ""

    def difference_text(self) -> str:
        """The difference in a few words, for a table cell: ``$0.0042 saved``,
        ``$0.0042 more``, ``no difference``."""
        if self.outcome == "saved":
            return f"{money(self.saved_usd)} saved"
        if self.outcome == "extra":
            return f"{money(self.extra_usd)} more"
        return "no difference"

    def headline(self) -> str:
        """The bill against the whole history with caching, in one sentence."""
        several = self.turns != 1
        subject = f"These {_number(self.turns)} turns" if several else "This turn"
        whole = "sending the whole history each turn" if several else "sending the whole history"
        billed, full = money(self.billed_usd), money(self.whole_history_usd)
        outcome = self.outcome
        if outcome == "unbilled":
            return f"{subject} {'were' if several else 'was'} not billed."
        if outcome == "same":
            return f"{subject} cost {billed}, the same as {whole} with prompt caching would have."
        if outcome == "saved":
            return (
                f"{subject} cost {billed}; {whole} with prompt caching would have cost {full}: "
                f"{money(self.saved_usd)} ({self.saved_percent}%) saved."
            )
        return (
            f"{subject} cost {billed}, {money(self.extra_usd)} more than {whole} with prompt "
            f"caching would have ({full}), because {self._why_more()}."
        )

    def _why_more(self) -> str:
        """Why the kept context was billed more than the whole history read from cache."""
        read, written = self.cache_read_tokens, self.cache_write_tokens
        its = "their prompts" if self.turns != 1 else "its prompt"
        if not read and not written:
            return (
                f"nothing of {its} was read from or written to the provider's cache, while the "
                "whole history would have been read from it"
            )
        if written > read:
            return (
                f"{_number(written)} tokens of {its} were written to the provider's cache (the "
                "kept messages started again), which costs more than reading the whole history "
                "from it"
            )
        return (
            "the parts sent for one turn only (recalled messages, per-turn values) are billed "
            "at the full input price, while the whole history would have been read from the cache"
        )

    def tokens_line(self) -> str:
        """Tokens second: the prompt's size against the whole history's."""
        several = self.turns != 1
        prompt = "Their prompts took" if several else "Its prompt took"
        whole = "the whole histories" if several else "the whole history"
        line = (
            f"{prompt} {_number(self.prompt_tokens)} tokens; {whole} would have taken "
            f"{_number(self.whole_history_tokens)}"
        )
        if self.saved_tokens:
            line += f" ({_number(self.saved_tokens)} fewer, {self.saved_tokens_percent}%)"
        return line + "."

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: amounts as strings of the stored precision, the sentences included."""
        quantum = COST_QUANTUM
        return {
            "outcome": self.outcome,
            "turns": self.turns,
            "billed_usd": str(Decimal(self.billed_usd).quantize(quantum)),
            "whole_history_usd": str(Decimal(self.whole_history_usd).quantize(quantum)),
            "saved_usd": str(self.saved_usd.quantize(quantum)),
            "extra_usd": str(self.extra_usd.quantize(quantum)),
            "saved_percent": self.saved_percent,
            "prompt_tokens": self.prompt_tokens,
            "whole_history_tokens": self.whole_history_tokens,
            "saved_tokens": self.saved_tokens,
            "saved_tokens_percent": self.saved_tokens_percent,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_read_percent": self.cache_read_percent,
            "simulated": self.simulated,
            "headline": self.headline(),
            "tokens_line": self.tokens_line(),
            "simulated_note": self.simulated_note,
        }
