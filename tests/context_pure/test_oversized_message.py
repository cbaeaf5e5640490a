"""A new message larger than the prompt budget leaves: cut in the middle, or (a policy that
sends oversized messages whole) sent whole by raising that turn's limit within the model's
window, every other section keeping what it had."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatplatform.core.context import AssemblyInputs, MessageItem, PackingPolicy, assemble

from .helpers import COUNTER, check_invariants

POLICY = PackingPolicy(
    strategy="sliding_window",
    context_window=20_000,
    max_context_tokens=3_000,
    reserved_response_tokens=500,
    system_budget=100,
    facts_budget=0,
    summaries_budget=0,
    retrieval_budget=0,
    min_recent_messages=4,
)


def turn(seq: int, words: int = 20) -> MessageItem:
    role: Any = "user" if seq % 2 else "assistant"
    return MessageItem(seq, seq, role, " ".join(f"word{seq}x{i}" for i in range(words)))


def inputs(new_words: int) -> AssemblyInputs:
    history = [turn(i + 1) for i in range(40)]
    return AssemblyInputs(new_message=turn(41, new_words), recent=list(reversed(history)))


def history_ids(prompt: Any) -> list[Any]:
    return [i.id for i in prompt.included if i.kind == "message"]


def test_cut_is_the_default() -> None:
    prompt = assemble(POLICY, inputs(3_000), COUNTER)
    assert prompt.new_message_truncated and prompt.widened_by == 0


def test_whole_sends_the_message_whole_and_keeps_the_other_sections() -> None:
    policy = replace(POLICY, oversized_message="whole")
    data = inputs(3_000)
    cut = assemble(POLICY, data, COUNTER)
    whole = assemble(policy, data, COUNTER)
    assert not whole.new_message_truncated
    assert whole.messages[-1]["content"].endswith(data.new_message.content)
    assert whole.widened_by > 0
    assert history_ids(whole) == history_ids(cut)
    # the raised limit holds the prompt, and stays inside the model's window
    raised = replace(policy, max_context_tokens=POLICY.max_context_tokens + whole.widened_by)
    check_invariants(raised, data, whole)
    assert POLICY.max_context_tokens + whole.widened_by <= POLICY.context_window


def test_whole_never_passes_the_models_window() -> None:
    policy = replace(POLICY, oversized_message="whole", context_window=4_000)
    data = inputs(6_000)
    prompt = assemble(policy, data, COUNTER)
    assert prompt.new_message_truncated
    assert prompt.widened_by == 4_000 - POLICY.max_context_tokens
    assert prompt.prompt_tokens + POLICY.reserved_response_tokens <= 4_000


def test_a_message_that_fits_is_sent_as_under_cut() -> None:
    data = inputs(50)
    whole = assemble(replace(POLICY, oversized_message="whole"), data, COUNTER)
    assert whole.widened_by == 0
    assert whole.messages == assemble(POLICY, data, COUNTER).messages
