"""Property tests of assemble(): the budget guarantee and the structural invariants."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatplatform.core.context import AssemblyInputs, MessageItem, PackingPolicy, assemble
from chatplatform.core.context.budget import plan_budget
from chatplatform.core.context.formatting import CONVERSATION_START, format_turn

from .helpers import COUNTER, INEXACT, check_invariants, histories, inputs_for, policies, recount

FAST = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FAST
@given(data=st.data())
def test_every_assembly_fits_and_keeps_invariants(data: st.DataObject) -> None:
    policy = data.draw(policies())
    history = data.draw(histories())
    inputs = data.draw(inputs_for(history))
    result = assemble(policy, inputs, COUNTER)
    check_invariants(policy, inputs, result)
    assert result.trimmed_after_recount == 0  # accounting is conservative


@settings(FAST, max_examples=20)
@given(data=st.data())
def test_inexact_counter_applies_the_safety_margin(data: st.DataObject) -> None:
    policy = data.draw(policies())
    inputs = data.draw(inputs_for(data.draw(histories(max_units=25))))
    result = assemble(policy, inputs, INEXACT)
    assert result.margin_ratio == policy.safety_margin_ratio
    total = recount(result, COUNTER, policy.reply_primer_tokens)
    assert math.ceil(total * policy.safety_margin_ratio) <= result.budget
    check_invariants(policy, inputs, result)


@settings(FAST, max_examples=30)
@given(data=st.data())
def test_min_recent_messages_kept_when_they_fit(data: st.DataObject) -> None:
    """If system + new message + the last N messages fit, all N are in the prompt."""
    policy = data.draw(policies(strategy=data.draw(st.sampled_from(["sliding_window", "hybrid"]))))
    history = data.draw(histories(max_units=30, tools=False))
    inputs = data.draw(inputs_for(history))
    result = assemble(policy, inputs, COUNTER)
    plan = plan_budget(policy, exact=True, counter_overhead=COUNTER.message_overhead)
    n = min(policy.min_recent_messages, policy.recent_message_cap)
    last = [m for m in reversed(history) if m.content.strip()][:n]
    cost = sum(
        COUNTER.count(format_turn(m, inputs.multi_user).prefix)
        + COUNTER.count(m.content)
        + plan.overhead
        for m in last
    )
    if last and last[-1].role == "assistant":
        cost += COUNTER.count(CONVERSATION_START) + plan.overhead
    system = result.section("system")
    new = result.section("new_message")
    assert system is not None and new is not None
    if not result.new_message_truncated and system.used + new.used + cost <= plan.room:
        included = {i.id for i in result.included if i.kind == "message"}
        assert {m.id for m in last} <= included


@settings(FAST, max_examples=12)
@given(policy=policies(), size=st.integers(5, 40), lie=st.integers(0, 3))
def test_understated_stored_counts_cannot_break_the_budget(
    policy: PackingPolicy, size: int, lie: int
) -> None:
    """Stored counts that lie (too small) are caught by the final recount."""
    history = [
        MessageItem(
            id=i,
            seq=i,
            role="user" if i % 2 else "assistant",
            content="Лорем ипсум 你好 " * (size * 10),
            tokens=lie,
            counted_by=COUNTER.name,
        )
        for i in range(1, 60)
    ]
    new = MessageItem(id=999, seq=999, role="user", content="大" * 20_000, tokens=lie)
    inputs = AssemblyInputs(
        new_message=new, recent=list(reversed(history)), system_template="Be brief. " * 50
    )
    result = assemble(policy, inputs, COUNTER)
    check_invariants(policy, inputs, result)


def test_new_message_over_the_counters_input_limit_is_truncated() -> None:
    """bpe-openai refuses 1,000,000+ characters; the core counts in chunks and cuts."""
    policy = PackingPolicy(
        context_window=8_000,
        max_context_tokens=8_000,
        reserved_response_tokens=1_000,
        system_budget=500,
        facts_budget=0,
        summaries_budget=0,
        retrieval_budget=0,
    )
    new = MessageItem(id=1, seq=1, role="user", content="word " * 250_000)
    inputs = AssemblyInputs(new_message=new, system_template="System.")
    result = assemble(policy, inputs, COUNTER)
    assert result.new_message_truncated
    check_invariants(policy, inputs, result)
    assert result.prompt_tokens > 6_500  # the cut message still uses the room
