"""Monthly spend limits: what a tenant, one of its members or one of its API keys may spend in
a calendar month, and where a spender stands against them.

A limit has a soft and a hard figure, each in US dollars and/or tokens (prompt and completion
tokens billed). Reaching a soft figure warns; reaching a hard one refuses new turns until the
month ends. Pure: the figures come from the caller (the month's running totals, kept with each
turn's record), so the rules are tested without a database.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo


@dataclass(frozen=True)
class MonthlyLimit:
    """A spender's limits; None: no limit of that kind."""

    soft_usd: Decimal | None = None
    hard_usd: Decimal | None = None
    soft_tokens: int | None = None
    hard_tokens: int | None = None

    @property
    def is_set(self) -> bool:
        return any(
            value is not None
            for value in (self.soft_usd, self.hard_usd, self.soft_tokens, self.hard_tokens)
        )


@dataclass(frozen=True)
class MonthlySpend:
    """What was spent this month: the bill in US dollars and the tokens billed."""

    cost_usd: Decimal = Decimal(0)
    tokens: int = 0


@dataclass(frozen=True)
class Spender:
    """A kind of spender a limit can be set for: the tenant, a member, an API key. Each says
    how a person is told about its limit."""

    name: str
    #: Whose limit it is, as the sentence's subject: "This workspace's monthly limit".
    owner: str


TENANT = Spender("tenant", "This workspace's")
MEMBER = Spender("member", "Your")
API_KEY = Spender("api_key", "This API key's")

#: Every kind of spender, in the order their limits are checked (the widest first).
SPENDERS: tuple[Spender, ...] = (TENANT, MEMBER, API_KEY)


@dataclass(frozen=True)
class Standing:
    """Where one spender stands against its limit this month."""

    spender: Spender
    limit: MonthlyLimit
    spent: MonthlySpend

    @property
    def exceeded(self) -> bool:
        """A hard figure is reached: new turns are refused."""
        return _reached(self.limit.hard_usd, self.limit.hard_tokens, self.spent)

    @property
    def warned(self) -> bool:
        """A soft figure (or a hard one) is reached."""
        return self.exceeded or _reached(self.limit.soft_usd, self.limit.soft_tokens, self.spent)

    def describe(self) -> str:
        """What a person reads: whose limit, what was used of it."""
        parts = []
        usd = self.limit.hard_usd if self.exceeded else (self.limit.soft_usd or self.limit.hard_usd)
        tokens = (
            self.limit.hard_tokens
            if self.exceeded
            else (self.limit.soft_tokens or self.limit.hard_tokens)
        )
        if usd is not None:
            parts.append(f"${self.spent.cost_usd:.2f} of ${usd:.2f}")
        if tokens is not None:
            parts.append(f"{self.spent.tokens:,} of {tokens:,} tokens")
        used = " and ".join(parts)
        if self.exceeded:
            return (
                f"{self.spender.owner} monthly spending limit is reached ({used} used this "
                "month): new messages are refused until the month ends or an admin raises "
                "the limit."
            )
        return f"{self.spender.owner} monthly spending is near its limit ({used} used)."


def _reached(usd: Decimal | None, tokens: int | None, spent: MonthlySpend) -> bool:
    return (usd is not None and spent.cost_usd >= usd) or (
        tokens is not None and spent.tokens >= tokens
    )


@dataclass(frozen=True)
class Standings:
    """Where every spender of a turn stands (only those with a limit)."""

    month: date
    items: tuple[Standing, ...] = ()
    #: When the month ends, in the tenant's time zone (when a refusal ends).
    month_end: datetime | None = None

    @property
    def refusal(self) -> Standing | None:
        """The first spender whose hard limit is reached, if any."""
        return next((item for item in self.items if item.exceeded), None)

    @property
    def warnings(self) -> tuple[Standing, ...]:
        return tuple(item for item in self.items if item.warned and not item.exceeded)


def month_start(now: datetime, zone: ZoneInfo) -> date:
    """The first day of ``now``'s calendar month in ``zone``."""
    return now.astimezone(zone).date().replace(day=1)


def month_end(month: date, zone: ZoneInfo) -> datetime:
    """The moment the calendar month starting ``month`` ends, in ``zone``."""
    following = (month.replace(day=28) + timedelta(days=4)).replace(day=1)
    return datetime(following.year, following.month, 1, tzinfo=zone)
