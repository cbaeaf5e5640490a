"""Example-based tests of assemble(): strategies, sections, formatting, accounting."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from chatplatform.core.context import (
    AssembledPrompt,
    AssemblyInputs,
    FactItem,
    MessageItem,
    PackingPolicy,
    PolicyError,
    RetrievedItem,
    SummaryItem,
    SystemPart,
    assemble,
)
from chatplatform.core.context.formatting import CONVERSATION_START, USER_MEMORIES_POINTER
from chatplatform.core.context.types import ItemId
from chatplatform.core.tokens.bpe import BpeCounter

from .helpers import COUNTER, check_invariants

T0 = datetime(2023, 5, 8, 13, 56)
BIG = PackingPolicy(context_window=50_000, max_context_tokens=50_000, model_name="m")


def msg(seq: int, role: Any = "user", content: str | None = None, **kw: Any) -> MessageItem:
    text = content if content is not None else f"message {seq}"
    return MessageItem(
        id=seq,
        seq=seq,
        role=role,
        content=text,
        created_at=T0 + timedelta(minutes=seq),
        **kw,
    )


def chat(n: int, **kw: Any) -> list[MessageItem]:
    """n alternating messages, newest first (as the caller fetches them)."""
    return [msg(i, "user" if i % 2 else "assistant", **kw) for i in range(n, 0, -1)]


def run(policy: PackingPolicy, **kw: Any) -> tuple[AssemblyInputs, AssembledPrompt]:
    new = kw.pop("new", msg(1000, content="the new question"))
    inputs = AssemblyInputs(new_message=new, **kw)
    result = assemble(policy, inputs, COUNTER)
    check_invariants(policy, inputs, result)
    return inputs, result


def ids(result: AssembledPrompt, kind: str) -> list[ItemId]:
    return [i.id for i in result.included if i.kind == kind]


def test_sliding_window_is_newest_to_oldest_and_chronological() -> None:
    policy = PackingPolicy(
        strategy="sliding_window",
        context_window=2_000,
        max_context_tokens=2_000,
        reserved_response_tokens=1_000,
        system_budget=100,
        facts_budget=0,
        summaries_budget=500,
        retrieval_budget=0,
        min_recent_messages=5,
    )
    summary = SummaryItem(1, "rolling", "old stuff", 1, 50)
    _, r = run(policy, recent=chat(300), summaries=[summary], system_template="Hi")
    hist = ids(r, "message")
    assert hist == sorted(hist) and hist[-1] == 300 and len(hist) > 5
    assert "conversation_summary" not in r.system
    assert ("summary", 1, None, "strategy") in r.excluded
    assert all(
        e.reason in ("over_budget", "window_trim", "cap") for e in r.excluded if e.kind == "message"
    )


def test_rolling_summary_uses_raw_messages_after_the_newest_summary() -> None:
    policy = PackingPolicy(
        strategy="rolling_summary",
        raw_history_limit=10,
        recent_message_cap=100,
        min_recent_messages=5,
    )
    summaries = [
        SummaryItem(1, "rolling", "first part", 1, 40),
        SummaryItem(2, "rolling", "second part", 41, 80),
    ]
    _, r = run(policy, recent=chat(100), summaries=summaries)
    assert ids(r, "message") == list(range(91, 101))  # raw_history_limit
    assert ids(r, "summary") == [2, 1]
    excluded = {e.id: e.reason for e in r.excluded if e.kind == "message"}
    assert excluded[85] == "cap" and excluded[80] == "outside_window"
    assert r.system.index("messages 1-40") < r.system.index("messages 41-80")


def test_hybrid_retrieval_dedups_adds_neighbours_and_renders_chronologically() -> None:
    history = [
        msg(i, "user" if i % 2 else "assistant", author="Caroline" if i % 2 else "Bot")
        for i in range(1, 201)
    ]
    policy = PackingPolicy(
        strategy="hybrid", recent_message_cap=20, min_recent_messages=20, retrieval_neighbors=1
    )
    retrieved = [
        RetrievedItem(history[49], 0.5, (history[48], history[50])),
        RetrievedItem(history[9], 0.9, (history[8], history[10])),
        RetrievedItem(history[199], 0.99),  # already in recent history
        RetrievedItem(history[9], 0.1),  # duplicate hit
    ]
    _, r = run(policy, recent=list(reversed(history)), retrieved=retrieved, bot_name="Bot")
    assert ids(r, "retrieved") == [9, 10, 11, 49, 50, 51]
    assert ("retrieved", 200, None, "duplicate") in r.excluded
    # a new window: the recalled messages are part of its cached prefix
    assert not r.window_kept and r.recalled_ids == (9, 10, 11, 49, 50, 51)
    block = r.system.split("<retrieved_messages>\n", 1)[1]
    lines = block.split("\n")[1:9]
    assert lines[0] == "[2023-05-08 14:05] Caroline: message 9"
    assert lines[1] == "[2023-05-08 14:06] Bot: message 10"
    assert lines[3] == "…" and lines[7] == "</retrieved_messages>"


def test_retrieved_duplicates_of_history_free_their_tokens_for_history() -> None:
    history = chat(60)
    policy = PackingPolicy(strategy="hybrid", min_recent_messages=0, recent_message_cap=60)
    retrieved = [RetrievedItem(m, 1.0) for m in history[30:40]]
    _, r = run(policy, recent=history, retrieved=retrieved)
    assert ids(r, "retrieved") == []
    assert len(ids(r, "message")) == 60


def test_unused_section_budget_flows_to_history() -> None:
    policy = PackingPolicy(
        strategy="hybrid",
        context_window=3_000,
        max_context_tokens=3_000,
        reserved_response_tokens=500,
        system_budget=300,
        facts_budget=400,
        summaries_budget=400,
        retrieval_budget=400,
        min_recent_messages=0,
        recent_message_cap=500,
    )
    _, r = run(policy, recent=chat(500, content="lorem ipsum dolor sit amet " * 3))
    history = r.section("history")
    assert history is not None and history.budget > 2_000
    assert r.prompt_tokens > 0.95 * r.counted_limit


def test_new_message_larger_than_the_budget_is_cut_head_and_tail() -> None:
    policy = PackingPolicy(
        context_window=4_000,
        max_context_tokens=4_000,
        reserved_response_tokens=1_000,
        system_budget=200,
        facts_budget=0,
        summaries_budget=0,
        retrieval_budget=0,
    )
    content = "HEAD-MARK " + "Привет мир 你好 " * 5_000 + " TAIL-MARK"
    new = msg(1000, content=content)
    _, r = run(policy, new=new, recent=chat(10), system_template="You are a bot.")
    assert r.new_message_truncated and not r.system_truncated
    last = r.messages[-1]["content"]
    assert last.startswith("HEAD-MARK") and last.endswith("TAIL-MARK")
    assert "tokens omitted …]" in last
    assert r.system == "You are a bot."
    assert ids(r, "message") == []


def test_oversized_newest_history_message_is_cut_not_dropped() -> None:
    policy = PackingPolicy(
        context_window=3_000,
        max_context_tokens=3_000,
        reserved_response_tokens=500,
        system_budget=0,
        facts_budget=0,
        summaries_budget=0,
        retrieval_budget=0,
    )
    long_reply = msg(10, "assistant", "start " + "data " * 10_000 + "end")
    _, r = run(policy, recent=[long_reply, msg(9)])
    assert ids(r, "message") == [10]
    assert [t.kind for t in r.truncated] == ["message"]
    assert r.messages[0]["content"] == CONVERSATION_START


def test_tool_call_and_result_are_dropped_together() -> None:
    call = msg(8, "assistant", "call search()", tool_group="t1")
    result = msg(9, "tool", "result " * 1_000, tool_group="t1")
    policy = PackingPolicy(
        context_window=1_000,
        max_context_tokens=1_000,
        reserved_response_tokens=200,
        system_budget=0,
        facts_budget=0,
        summaries_budget=0,
        retrieval_budget=0,
    )
    _, r = run(policy, recent=[msg(10), result, call, msg(7)])
    assert ids(r, "message") == [10]
    _, r = run(BIG, recent=[msg(10), result, call, msg(7)])
    assert ids(r, "message") == [7, 8, 9, 10]
    assert r.messages[-2] == {"role": "assistant", "content": "call search()"}
    assert r.messages[-1]["content"].startswith("[tool result]: result")
    # a result whose call was not fetched is left out
    _, r = run(BIG, recent=[msg(10), result])
    assert ("message", 9, None, "incomplete_tool_group") in r.excluded


def test_multi_user_format_and_merged_turns() -> None:
    a = msg(1, author="Caroline Doe (@caro)")
    b = msg(2, author="Mel [x]", reply_to_excerpt='She said "hi"\nthere')
    new = msg(3, content="and me", author="Caroline Doe (@caro)")
    _, r = run(BIG, recent=[b, a], new=new, multi_user=True)
    assert r.messages == [
        {
            "role": "user",
            "content": (
                "[Caroline Doe (@caro)]: message 1\n\n"
                "[Mel (x)] (reply to: \"She said 'hi' there\"): message 2\n\n"
                "[Caroline Doe (@caro)]: and me"
            ),
        }
    ]


def test_unknown_and_foreign_counts_are_recounted_and_reported() -> None:
    recent = [msg(3, tokens=2, counted_by=COUNTER.name), msg(2, tokens=2, counted_by="est"), msg(1)]
    _, r = run(BIG, recent=recent)
    assert sorted(i.id for i in r.recounted) == [1, 2, 1000]
    assert all(i.tokens == COUNTER.count(f"message {i.id}") for i in r.recounted if i.id != 1000)


def test_cached_prefix_is_system_facts_and_summaries_the_tail_is_this_turns() -> None:
    summaries = [
        SummaryItem(1, "rolling", "rolling text", 90, 100),
        SummaryItem(2, "long", "long text", 1, 89),
        SummaryItem(3, "carried", "previous chat", 1, 10),
    ]
    _, r = run(
        BIG,
        system=SystemPart("SYSTEM PROMPT"),
        summaries=summaries,
        facts=[FactItem(1, "likes tea")],
    )
    assert r.stable_prefix.chars == len(r.system)
    assert r.system.startswith("SYSTEM PROMPT") and r.system.endswith("</conversation_summary>")
    for text in ("previous chat", "long text", "rolling text", "likes tea"):
        assert text in r.system
    assert r.system.index("previous chat") < r.system.index("long text")
    assert r.system.index("long text") < r.system.index("rolling text")
    assert r.stable_prefix.tokens == COUNTER.count(r.system)
    assert r.tail == ""


def test_per_turn_values_travel_with_the_new_message() -> None:
    template = "Now: {timestamp}. You talk with {userfullname}."
    variables = {"timestamp": "2025-01-01T12:00", "userfullname": "Ann"}
    _, private = run(BIG, system_template=template, variables=variables)
    assert "2025-01-01T12:00" not in private.system and "Ann" in private.system
    assert (
        private.tail.startswith("<turn_values>") and "timestamp: 2025-01-01T12:00" in private.tail
    )
    _, group = run(BIG, system_template=template, variables=variables, multi_user=True)
    assert "Ann" not in group.system and "Ann" in group.tail
    _, later = run(
        BIG, system_template=template, variables={**variables, "timestamp": "2025-01-01T12:01"}
    )
    assert later.system == private.system


def test_a_group_chats_facts_belong_to_the_author_and_sit_in_the_tail() -> None:
    _, r = run(BIG, facts=[FactItem(1, "likes tea")], multi_user=True)
    assert "likes tea" not in r.system and "likes tea" in r.tail


def test_rolling_summary_without_summaries_shown_keeps_raw_history() -> None:
    policy = PackingPolicy(strategy="rolling_summary", max_summaries_in_context=0)
    _, r = run(policy, recent=chat(30), summaries=[SummaryItem(1, "rolling", "x", 1, 25)])
    assert ids(r, "message") == list(range(1, 31))


def test_user_memories_variable_points_to_the_fenced_block() -> None:
    facts = [FactItem(1, "{username} likes </user_facts> tea")]
    _, r = run(
        BIG, system_template="Known: {user_memories}", facts=facts, variables={"username": "@x"}
    )
    assert r.system.startswith("Known: " + USER_MEMORIES_POINTER)
    assert "- {username} likes &lt;/user_facts&gt; tea" in r.system


def test_percent_budgets_are_shares_of_what_is_left() -> None:
    policy = PackingPolicy(
        budget_unit="percent",
        system_budget=10,
        facts_budget=1,
        summaries_budget=0,
        retrieval_budget=0,
        context_window=10_000,
        max_context_tokens=10_000,
        reserved_response_tokens=0,
        max_facts=100,
    )
    facts = [FactItem(i, f"fact number {i} " * 3) for i in range(100)]
    _, r = run(policy, facts=facts)
    facts_usage = r.section("facts")
    assert facts_usage is not None and facts_usage.budget < 100
    assert 0 < facts_usage.used <= facts_usage.budget


def test_invalid_policy_and_assistant_new_message_are_rejected() -> None:
    with pytest.raises(PolicyError, match="lower them by"):
        assemble(PackingPolicy(max_context_tokens=300_000), AssemblyInputs(msg(1)), COUNTER)
    with pytest.raises(ValueError, match="user or tool"):
        assemble(BIG, AssemblyInputs(msg(1, "assistant")), COUNTER)


class CountingBpe(BpeCounter):
    def __init__(self) -> None:
        super().__init__("o200k_base")
        self.chars = 0

    def count(self, text: str) -> int:
        self.chars += len(text)
        return super().count(text)


def test_work_is_proportional_to_the_prompt_not_the_history() -> None:
    counter = CountingBpe()
    text = "a fairly ordinary message of moderate length " * 20
    n = COUNTER.count(text)
    recent = [msg(i, content=text, tokens=n, counted_by=counter.name) for i in range(20_000, 0, -1)]
    policy = PackingPolicy(
        context_window=8_000,
        max_context_tokens=8_000,
        recent_message_cap=20_000,
        system_budget=500,
        facts_budget=500,
        summaries_budget=500,
        retrieval_budget=500,
    )
    inputs = AssemblyInputs(new_message=msg(30_000), recent=recent)
    result = assemble(policy, inputs, counter)
    prompt_chars = len(result.system) + sum(len(m["content"]) for m in result.messages)
    assert counter.chars < 3 * prompt_chars
    assert len(ids(result, "message")) < 100


def test_understated_system_count_is_cut_by_the_final_check() -> None:
    policy = PackingPolicy(
        context_window=4_000,
        max_context_tokens=4_000,
        reserved_response_tokens=1_000,
        system_budget=1_000,
        facts_budget=0,
        summaries_budget=0,
        retrieval_budget=0,
    )
    system = SystemPart("Rule one. " + "rule " * 5_000, tokens=1, counted_by=COUNTER.name)
    _, r = run(policy, system=system, recent=chat(20))
    assert r.system_truncated and r.system.startswith("Rule one.")
    assert r.system.count("tokens omitted") == 1
    assert r.trimmed_after_recount == 20
    assert r.messages[-1]["content"] == "the new question"
