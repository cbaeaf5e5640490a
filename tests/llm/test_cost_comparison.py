"""The one comparison every surface tells: the bill first, against the whole history sent with
caching; the difference as saved or as extra, never a negative saving; tokens second."""

from __future__ import annotations

from decimal import Decimal

from chatplatform.core.llm.cost_comparison import SIMULATED_NOTE, CostComparison, money


def test_a_cheaper_turn_says_what_it_cost_and_what_it_saved() -> None:
    c = CostComparison(
        Decimal("0.0078"), Decimal("0.012"), prompt_tokens=2_100, whole_history_tokens=4_000
    )
    assert c.outcome == "saved"
    assert c.saved_usd == Decimal("0.0042") and c.extra_usd == 0
    assert c.headline() == (
        "This turn cost $0.0078; sending the whole history with prompt caching would have "
        "cost $0.0120: $0.0042 (35.0%) saved."
    )
    assert c.tokens_line() == (
        "Its prompt took 2,100 tokens; the whole history would have taken 4,000 (1,900 "
        "fewer, 47.5%)."
    )
    assert c.difference_text() == "$0.0042 saved"


def test_a_dearer_turn_says_so_plainly_and_why_never_a_negative_saving() -> None:
    c = CostComparison(
        Decimal("0.012"),
        Decimal("0.0078"),
        prompt_tokens=2_100,
        whole_history_tokens=4_000,
        cache_write_tokens=1_900,
        cache_read_tokens=0,
    )
    assert c.outcome == "extra"
    assert c.saved_usd == 0 and c.extra_usd == Decimal("0.0042")
    headline = c.headline()
    assert headline.startswith(
        "This turn cost $0.0120, $0.0042 more than sending the whole history with prompt "
        "caching would have ($0.0078), because 1,900 tokens of its prompt were written"
    )
    assert "-" not in headline and "negative" not in headline
    assert c.difference_text() == "$0.0042 more"
    shown = c.as_dict()
    assert shown["saved_usd"] == "0.000000" and shown["extra_usd"] == "0.004200"
    # Fewer tokens, still: tokens come second and say only that.
    assert shown["saved_tokens"] == 1_900


def test_nothing_read_from_cache_is_the_reason_given_when_nothing_was_cached() -> None:
    c = CostComparison(Decimal("0.02"), Decimal("0.01"), prompt_tokens=500)
    assert "nothing of its prompt was read from or written to the provider's cache" in (
        c.headline()
    )


def test_several_turns_same_cost_and_unbilled() -> None:
    several = CostComparison(Decimal("0.5"), Decimal("0.5"), turns=3)
    assert several.headline() == (
        "These 3 turns cost $0.5000, the same as sending the whole history each turn with "
        "prompt caching would have."
    )
    assert CostComparison(Decimal(0), Decimal(0)).headline() == "This turn was not billed."
    assert CostComparison(Decimal(0), Decimal(0), turns=2).outcome == "unbilled"


def test_simulated_figures_carry_the_note() -> None:
    shown = CostComparison(Decimal("0.01"), Decimal("0.02"), simulated=True).as_dict()
    assert shown["simulated"] and shown["simulated_note"] == SIMULATED_NOTE
    assert CostComparison(Decimal("0.01"), Decimal("0.02")).as_dict()["simulated_note"] == ""


def test_money_reads_like_money() -> None:
    assert money(Decimal("0.012")) == "$0.0120"
    assert money(Decimal("0.000312")) == "$0.000312"
    assert money(Decimal("0.0001")) == "$0.0001"
    assert money(Decimal(0)) == "$0"
    assert money(Decimal("1.5")) == "$1.5000"
