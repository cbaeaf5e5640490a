"""The offline provider: deterministic, clearly labelled, and reports the context it got."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Literal

import pytest

from chatplatform.core.llm import (
    ChatRequest,
    ContextReport,
    ContextSection,
    Done,
    RequestMessage,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from chatplatform.core.llm.context_report import LeftOut, PromptMessage, PromptSummary
from chatplatform.core.llm.offline_provider import OFFLINE_LABEL, OfflineProvider
from chatplatform.core.llm.tool_loop import stream_with_tools
from chatplatform.core.llm.tools import FACT_TOOLS
from chatplatform.core.tokens.bpe import BpeCounter

from .helpers import collect, text_of

pytestmark = pytest.mark.asyncio

REPORT = ContextReport(
    sections=(
        ContextSection("system", 120, items=1),
        ContextSection("facts", 30, items=2),
        ContextSection("summaries", 400, items=1),
        ContextSection("retrieval", 90, items=2, dropped=3),
        ContextSection("history", 800, items=12),
    ),
    facts=("The user lives in Kyiv.", "The user likes green tea."),
    summaries=(PromptSummary("rolling", 1, 40),),
    retrieved=(
        PromptMessage(7, "user", "what was the name of that tea shop?"),
        PromptMessage(8, "Assistant", "It was Chaika."),
    ),
    history=(41, 52),
    left_out=(LeftOut("retrieved", "duplicate", 2), LeftOut("retrieved", "over_budget", 1)),
    budget_tokens=4000,
    counter="o200k_base",
    strategy="hybrid",
)


def request(text: str, report: ContextReport | None = REPORT) -> ChatRequest:
    return ChatRequest(
        model="offline",
        system="You are helpful.",
        messages=[
            RequestMessage("user", "earlier"),
            RequestMessage("assistant", "reply"),
            RequestMessage("user", text),
        ],
        context_report=report,
    )


@pytest.fixture(scope="module")
def counter() -> BpeCounter:
    return BpeCounter("o200k_base")


async def test_reply_is_labelled_echoes_and_reports_the_context(counter: BpeCounter) -> None:
    events = await collect(OfflineProvider(counter).stream(request("Where did I buy tea?")))
    reply = text_of(events)

    assert reply.startswith(OFFLINE_LABEL)
    assert "not from a model" in reply
    assert 'You wrote: "Where did I buy tea?"' in reply
    assert "1440 tokens of a 4000-token budget in 5 sections (counted with o200k_base)" in reply
    assert "- retrieval: 90 tokens, 2 items, 3 left out" in reply
    assert "- The user likes green tea." in reply
    assert "Recent messages I saw word for word: 12 messages, #41 to #52." in reply
    assert "- rolling summary, covering messages #1 to #40" in reply
    assert "Earlier messages recalled as relevant (2):" in reply
    assert '- #7 user: "what was the name of that tea shop?"' in reply
    assert '- #8 Assistant: "It was Chaika."' in reply
    assert "Left out (3):" in reply
    assert "- 2 retrieved messages: duplicate of an item already included" in reply
    assert "- 1 retrieved message: did not fit the budget" in reply


async def test_nothing_recalled_says_so_and_names_each_kind_of_summary(
    counter: BpeCounter,
) -> None:
    from dataclasses import replace

    report = replace(
        REPORT,
        sections=(ContextSection("history", 50, items=1),),
        summaries=(
            PromptSummary("recent", 3, 3),
            PromptSummary("carried", 1, 90),
        ),
        retrieved=(),
        history=(9, 9),
        left_out=(),
    )
    reply = text_of(await collect(OfflineProvider(counter).stream(request("Hi", report))))

    assert "Recent messages I saw word for word: 1 message, #9." in reply
    assert "- summary of the last 7 days, covering message #3" in reply
    assert "- summary carried over from an earlier conversation, covering messages #1 to #90" in (
        reply
    )
    assert "Earlier messages recalled as relevant: none." in reply
    assert "Left out" not in reply


async def test_deltas_are_words_and_the_stream_is_deterministic(counter: BpeCounter) -> None:
    provider = OfflineProvider(counter)
    first = await collect(provider.stream(request("Hello")))
    second = await collect(provider.stream(request("Hello")))

    assert first == second
    deltas = [e.text for e in first if isinstance(e, TextDelta)]
    assert len(deltas) > 20
    assert all(len(d.split()) <= 1 for d in deltas)


async def test_usage_is_counted_with_the_supplied_counter(counter: BpeCounter) -> None:
    req = request("Hello")
    events = await collect(OfflineProvider(counter).stream(req))

    usage = events[-2]
    assert isinstance(usage, Usage)
    assert events[-1] == Done("end_turn", usage)
    expected_input = counter.count("You are helpful.") + sum(
        counter.count_message(m.role, str(m.content)) for m in req.messages
    )
    assert usage.input_tokens == expected_input
    assert usage.output_tokens == counter.count(text_of(events))


async def test_long_messages_are_echoed_truncated(counter: BpeCounter) -> None:
    long_text = "слово " * 100
    reply = text_of(await collect(OfflineProvider(counter).stream(request(long_text))))

    echo_line = next(line for line in reply.splitlines() if line.startswith("You wrote"))
    assert echo_line.endswith('…"')
    assert len(echo_line) < 100


async def test_without_a_report_it_describes_the_request_itself(counter: BpeCounter) -> None:
    reply = text_of(await collect(OfflineProvider(counter).stream(request("Hi", report=None))))

    assert "in 2 sections (counted with o200k_base)" in reply
    assert "- history:" in reply and "3 items" in reply
    assert "Recent messages I saw word for word: 3 messages." in reply
    assert "Facts about you I saw: none." in reply


async def test_delay_between_words_is_configurable(counter: BpeCounter) -> None:
    provider = OfflineProvider(counter, delay=0.001)
    events = await collect(provider.stream(request("Hi")))

    assert provider.offline is True
    assert isinstance(events[-1], Done)


async def test_input_usage_is_the_platforms_count_when_made_with_the_same_counter(
    counter: BpeCounter,
) -> None:
    from dataclasses import replace

    same = replace(REPORT, counter=counter.name, prompt_tokens=777)
    other = replace(REPORT, counter="estimator-v1", prompt_tokens=777)
    usage_same = (await collect(OfflineProvider(counter).stream(request("Hi", same))))[-2]
    usage_other = (await collect(OfflineProvider(counter).stream(request("Hi", other))))[-2]
    assert isinstance(usage_same, Usage) and isinstance(usage_other, Usage)
    assert usage_same.input_tokens == 777
    assert usage_other.input_tokens != 777  # counted itself: another tokenizer's figure


async def test_offered_the_fact_tool_it_saves_what_the_message_states(
    counter: BpeCounter,
) -> None:
    """Through the same tool loop a model's calls take: it asks to save the stated fact, then
    replies to the message, saying what was remembered."""
    asked: list[ToolCall] = []

    async def save(call: ToolCall) -> str:
        asked.append(call)
        return json.dumps({"ok": True, "saved": True, "fact": {"id": 1, **call.input}})

    offered = replace(request("Hi! I live in Lisbon."), tools=FACT_TOOLS)
    events = await collect(stream_with_tools(OfflineProvider(counter), offered, save))

    assert asked == [
        ToolCall(
            "offline_fact_1",
            "save_user_fact",
            {"text": "The user lives in Lisbon.", "key": "home_city"},
        )
    ]
    reply = text_of(events)
    assert reply.startswith(OFFLINE_LABEL)
    assert 'You wrote: "Hi! I live in Lisbon."' in reply
    assert reply.endswith("Remembered: The user lives in Lisbon.")
    done = events[-1]
    assert isinstance(done, Done) and done.stop_reason == "end_turn"


async def test_a_fact_that_could_not_be_saved_is_said_so(counter: BpeCounter) -> None:
    async def refuse(call: ToolCall) -> str:
        raise RuntimeError("User facts are turned off for this tenant.")

    offered = replace(request("My name is Ana"), tools=FACT_TOOLS)
    reply = text_of(await collect(stream_with_tools(OfflineProvider(counter), offered, refuse)))
    assert reply.endswith("Could not remember a fact you stated; it was not saved.")


@pytest.mark.parametrize(
    ("text", "tools", "tool_choice"),
    [
        ("What is my name?", FACT_TOOLS, "auto"),  # a question states nothing
        ("I live in Lisbon", (), "auto"),  # the tool is not offered
        ("I live in Lisbon", FACT_TOOLS, "none"),  # tools are not allowed in this call
    ],
)
async def test_without_a_stated_fact_or_the_tool_it_only_replies(
    counter: BpeCounter,
    text: str,
    tools: tuple[ToolSpec, ...],
    tool_choice: Literal["auto", "none"],
) -> None:
    offered = replace(request(text), tools=tools, tool_choice=tool_choice)
    events = await collect(OfflineProvider(counter).stream(offered))
    assert not [e for e in events if isinstance(e, ToolCall)]
    done = events[-1]
    assert isinstance(done, Done) and done.stop_reason == "end_turn"
    assert "Remembered" not in text_of(events)


async def test_the_echo_never_shows_the_prompts_framing_tags(counter: BpeCounter) -> None:
    said = "[Alice (@alice)]: hi all\n\n<turn_values>\ntime: 12:00\n</turn_values>"
    reply = text_of(await collect(OfflineProvider(counter).stream(request(said))))

    echo_line = next(line for line in reply.splitlines() if line.startswith("You wrote"))
    assert "hi all" in echo_line
    assert "turn_values" not in echo_line and "<" not in echo_line
