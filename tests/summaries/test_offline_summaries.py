"""The offline provider answers the model summarizer with a summary of the conversation (the
messages' own sentences, with their speakers, within the size asked), not with its usual
description of the prompt."""

from __future__ import annotations

import json
from typing import cast

from chatplatform.core.llm.base import ChatRequest, RequestMessage
from chatplatform.core.llm.offline_provider import OFFLINE_LABEL, OfflineProvider, render_reply
from chatplatform.core.llm.summary_request import SummarySource, SummaryTask, extractive_summary
from chatplatform.core.tokens import get_counter
from chatplatform.core.tokens.base import TokenCounter
from summaries.summarizer import ModelSummarizer, SourceMessage, SourceSummary
from summaries.summarizer.types import StructuredSummary

COUNTER = get_counter("o200k_base")
CONVERSATION = [
    SourceMessage(
        1, "user", "We launch the Lisbon office in March. The lease starts on 2025-03-01.", "ada"
    ),
    SourceMessage(
        2,
        "assistant",
        "Good plan for Lisbon. The budget of 12000 EUR covers six months of rent.",
        "assistant",
    ),
    SourceMessage(3, "user", "Book the movers for the second week.\nWho signs the lease?", "ada"),
]


def offline_engine() -> ModelSummarizer:
    return ModelSummarizer(
        provider_factory=lambda: OfflineProvider(COUNTER),
        model="offline",
        counter=COUNTER,
        context_window=100_000,
        max_output_tokens=4096,
    )


def test_the_summary_is_made_of_the_conversation_with_speakers():
    draft = offline_engine().summarize_messages(CONVERSATION, max_tokens=300)
    summary = draft.content.summary
    assert summary == (
        "ada: We launch the Lisbon office in March. "
        "assistant: Good plan for Lisbon. "
        "ada: Book the movers for the second week."
    )
    assert OFFLINE_LABEL not in draft.text
    assert "Context I was given" not in draft.text
    assert draft.content.facts == (
        "The lease starts on 2025-03-01.",
        "The budget of 12000 EUR covers six months of rent.",
    )
    assert draft.content.open_questions == ("Who signs the lease?",)
    assert draft.attempts == 1


def test_the_same_conversation_gives_the_same_summary():
    first = offline_engine().summarize_messages(CONVERSATION, max_tokens=300)
    second = offline_engine().summarize_messages(CONVERSATION, max_tokens=300)
    assert first.text == second.text


def test_a_long_conversation_fits_the_size_asked_keeping_the_informative_messages():
    messages = [
        SourceMessage(i, "user", "ok." if i % 2 else f"Topic {i}: " + "detail " * 3 + f"w{i}.")
        for i in range(1, 81)
    ]
    draft = offline_engine().summarize_messages(messages, max_tokens=120)
    assert draft.token_count <= 120
    assert "Topic" in draft.content.summary
    assert "user: ok." not in draft.content.summary
    # Chronological order is kept among the sentences that stayed.
    numbers = [int(part.split(":")[0]) for part in draft.content.summary.split("Topic ")[1:]]
    assert numbers == sorted(numbers)


def test_one_huge_message_is_cut_to_the_size_asked():
    message = SourceMessage(1, "user", " ".join(f"word{i}" for i in range(3000)), "ada")
    draft = offline_engine().summarize_messages([message], max_tokens=60)
    assert draft.token_count <= 60
    assert draft.content.summary.startswith("ada: word0 word1")


def test_merging_summaries_keeps_each_span_first_sentence():
    parts = [
        SourceSummary(1, 10, StructuredSummary("Ada planned the launch. It went on.")),
        SourceSummary(11, 20, StructuredSummary("Bo booked the movers. Then more.")),
    ]
    draft = offline_engine().merge_summaries(parts, max_tokens=200)
    assert draft.content.summary == (
        "(messages 1-10) Ada planned the launch. (messages 11-20) Bo booked the movers."
    )


def test_a_chat_reply_still_describes_the_context():
    """Requests that are not summarisation requests keep the offline reply."""
    reply = render_reply(
        ChatRequest(model="offline", messages=(RequestMessage("user", "hi"),)), COUNTER
    )
    assert reply.startswith(OFFLINE_LABEL)


class CountingCounter:
    """The offline counter, counting how often it is asked."""

    name = COUNTER.name

    def __init__(self) -> None:
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return COUNTER.count(text)


def test_a_very_long_conversation_is_counted_once_per_message():
    sources = [
        SummarySource(f"Point {i} about the plan, item w{i}. More detail follows.", speaker="ada")
        for i in range(3000)
    ]
    counter = CountingCounter()
    answer = json.loads(
        extractive_summary(SummaryTask(sources, max_tokens=200), cast(TokenCounter, counter))
    )
    assert COUNTER.count(answer["summary"]) <= 200
    assert answer["summary"].startswith("ada: Point")
    assert counter.calls <= len(sources) + 20
