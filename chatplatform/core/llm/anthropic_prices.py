"""Documented Claude models: context window, output limit and prices per million tokens.

The one table the platform reads when it creates an Anthropic model profile (the data
migration and the update from the provider's Models API). Prices are never overwritten once
a profile exists: the admin edits them. A model missing here gets zero prices and a flag.

Sources, as read on 2026-11-26 (Anthropic's documentation, platform.claude.com):

* "Pricing" (about-claude/pricing, model table): Fable 5.1, Mythos 5.1, Fable 5, Mythos 5,
  Opus 5, Opus 4.8, 4.7, 4.6 and 4.5 (input, 5-minute and 1-hour cache writes, cache hits,
  output); Sonnet 4.6 and Haiku 4.5 in the same table.
* Each model's page (models/<model>/overview): context window and max output (1M / 128K for
  Fable 5.2, Fable 5.1, Fable 5, Opus 5.5, Opus 5, Sonnet 5.5, Sonnet 5, Haiku 5.5), the
  input and output prices of Fable 5.2 ($8 / $40), Opus 5.5 ($4 / $20), Sonnet 5.5 and
  Sonnet 5 ($2 / $10), Haiku 5.5 ("from $0.10 / $0.50": priced by prompt length), and the
  cache prices of Sonnet 5 and Opus 5.
* Cache prices of Fable 5.2 ($10 / $16 / $0.20), Opus 5.5 ($5 / $8 / $0.20), Sonnet 5.5
  ($2.50 / $4, cache hits $0.10 since the cut of 2026-10-07) and both price bands of
  Haiku 5.5 were not in the excerpts of Anthropic's pages available here; they are as
  third-party price trackers quote Anthropic's pricing page (release notes of claudit
  v1.8.2 and v1.9.2, PromptFuel v1.0.23, rightsize v0.10.2). Check them on the pricing page.

Long context: Haiku 5.5 bills a request whose prompt (input + cache reads + cache writes) is
over 100,000 tokens at its higher rates, on every token of that request, output included.
Sonnet 5.5 charges no long-context premium. Claude Sonnet 4 / 4.5 charged $6 / $22.50 above
200K input tokens on their 1M-token beta window; whether Sonnet 4.6 still does was not
settled by the sources found, so it has no tier here (the admin can set one).

Not documented here (no window, output limit or price found): Claude Mythos 5.2 and Claude
Mythos Preview; the context windows of Opus 4.8, 4.7, 4.6 and Sonnet 4.6 (their prices are
known). The Models API reports windows and output limits; prices stay for the admin.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class Prices:
    """USD per million tokens: input, output, cache hits, 5-minute and 1-hour cache writes."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal
    cache_write_1h: Decimal


def _prices(inp: str, out: str, read: str, write: str, write_1h: str) -> Prices:
    return Prices(Decimal(inp), Decimal(out), Decimal(read), Decimal(write), Decimal(write_1h))


@dataclass(frozen=True)
class LongContext:
    """Above ``threshold`` prompt tokens the whole request is billed at ``prices``."""

    threshold: int
    prices: Prices


@dataclass(frozen=True)
class DocumentedModel:
    model: str
    name: str
    prices: Prices
    context_window: int | None = None
    max_output_tokens: int | None = None
    long_context: LongContext | None = None
    #: Offered by invitation only: created inactive, for the operator to switch on.
    limited: bool = False


_MILLION, _128K = 1_000_000, 128_000
_FABLE_5_1 = _prices("10", "50", "0.25", "12.50", "20")
_FABLE_5 = _prices("10", "50", "1", "12.50", "20")
_OPUS_5 = _prices("5", "25", "0.50", "6.25", "10")

DOCUMENTED: tuple[DocumentedModel, ...] = (
    DocumentedModel(
        "claude-fable-5-2",
        "Claude Fable 5.2",
        _prices("8", "40", "0.20", "10", "16"),
        _MILLION,
        _128K,
    ),
    DocumentedModel(
        "claude-opus-5-5",
        "Claude Opus 5.5",
        _prices("4", "20", "0.20", "5", "8"),
        _MILLION,
        _128K,
    ),
    DocumentedModel(
        "claude-sonnet-5-5",
        "Claude Sonnet 5.5",
        _prices("2", "10", "0.10", "2.50", "4"),
        _MILLION,
        _128K,
    ),
    DocumentedModel(
        "claude-haiku-5-5",
        "Claude Haiku 5.5",
        _prices("0.10", "0.50", "0.01", "0.125", "0.20"),
        _MILLION,
        _128K,
        long_context=LongContext(100_000, _prices("0.50", "2.50", "0.05", "0.625", "1.00")),
    ),
    DocumentedModel("claude-fable-5-1", "Claude Fable 5.1", _FABLE_5_1, _MILLION, _128K),
    DocumentedModel(
        "claude-mythos-5-1", "Claude Mythos 5.1", _FABLE_5_1, _MILLION, _128K, limited=True
    ),
    DocumentedModel("claude-fable-5", "Claude Fable 5", _FABLE_5, _MILLION, _128K),
    DocumentedModel("claude-mythos-5", "Claude Mythos 5", _FABLE_5, _MILLION, _128K, limited=True),
    DocumentedModel(
        "claude-sonnet-5",
        "Claude Sonnet 5",
        _prices("2", "10", "0.20", "2.50", "4"),
        _MILLION,
        _128K,
    ),
    DocumentedModel("claude-opus-5", "Claude Opus 5", _OPUS_5, _MILLION, _128K),
    DocumentedModel("claude-opus-4-8", "Claude Opus 4.8", _OPUS_5),
    DocumentedModel("claude-opus-4-7", "Claude Opus 4.7", _OPUS_5),
    DocumentedModel("claude-opus-4-6", "Claude Opus 4.6", _OPUS_5),
    DocumentedModel(
        "claude-sonnet-4-6", "Claude Sonnet 4.6", _prices("3", "15", "0.30", "3.75", "6")
    ),
    DocumentedModel("claude-opus-4-5", "Claude Opus 4.5", _OPUS_5),
    DocumentedModel(
        "claude-sonnet-4-5", "Claude Sonnet 4.5", _prices("3", "15", "0.30", "3.75", "6")
    ),
    DocumentedModel("claude-haiku-4-5", "Claude Haiku 4.5", _prices("1", "5", "0.10", "1.25", "2")),
)
_BY_ID = {m.model: m for m in DOCUMENTED}


def documented(model_id: str) -> DocumentedModel | None:
    """The documented entry of ``model_id``; a dated snapshot id (``claude-haiku-4-5-20251001``)
    falls back to its alias."""
    if model_id in _BY_ID:
        return _BY_ID[model_id]
    head, _, tail = model_id.rpartition("-")
    if tail.isdigit() and len(tail) == 8:
        return _BY_ID.get(head)
    return None


def price_fields(entry: DocumentedModel) -> dict[str, Decimal | int | None]:
    """A model profile's price fields (names as stored) for a documented model."""
    fields: dict[str, Decimal | int | None] = {
        "price_input_per_mtok": entry.prices.input,
        "price_output_per_mtok": entry.prices.output,
        "price_cache_read_per_mtok": entry.prices.cache_read,
        "price_cache_write_per_mtok": entry.prices.cache_write,
        "price_cache_write_1h_per_mtok": entry.prices.cache_write_1h,
    }
    long = entry.long_context
    fields.update(
        long_context_threshold_tokens=long.threshold if long else None,
        price_long_input_per_mtok=long.prices.input if long else None,
        price_long_output_per_mtok=long.prices.output if long else None,
        price_long_cache_read_per_mtok=long.prices.cache_read if long else None,
        price_long_cache_write_per_mtok=long.prices.cache_write if long else None,
        price_long_cache_write_1h_per_mtok=long.prices.cache_write_1h if long else None,
    )
    return fields
