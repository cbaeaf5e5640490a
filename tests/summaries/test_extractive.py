"""The extractive engine: pure Python, no model, no downloads."""

from __future__ import annotations

import pytest

from chatplatform.core.tokens import get_counter
from summaries.summarizer import (
    ExtractiveSummarizer,
    SourceMessage,
    SourceSummary,
    StructuredSummary,
    SummaryFailed,
    render_summary,
)

COUNTER = get_counter("o200k_base")

TRIP = [
    (
        "user",
        "Ada",
        "Hi! I'm planning a trip to Lisbon with my wife Maria. We fly on March 14 "
        "and return March 21.",
    ),
    (
        "assistant",
        "Assistant",
        "Great choice. Lisbon in March is mild, around 17°C. You should "
        "visit Belém and the Alfama district. Do you want restaurant tips?",
    ),
    ("user", "Ada", "Yes please. Our budget is about €80 per dinner. Is Sintra worth a day trip?"),
    (
        "assistant",
        "Assistant",
        "Sintra is absolutely worth it; take the train from Rossio, it "
        "takes 40 minutes and costs €2.40. For dinner try Cervejaria Ramiro.",
    ),
    (
        "user",
        "Ada",
        "We decided to book the Pestana hotel for 6 nights. Can you check whether it has parking?",
    ),
    (
        "assistant",
        "Assistant",
        "I don't know whether the Pestana has parking; please check their site.",
    ),
    ("user", "Ada", "OK. What is the best way to get from the airport to the hotel?"),
]


def trip() -> list[SourceMessage]:
    return [
        SourceMessage(seq=i + 1, role=role, author=author, content=text)
        for i, (role, author, text) in enumerate(TRIP)
    ]


def sentences_of(messages: list[SourceMessage]) -> str:
    return " ".join(m.content for m in messages)


@pytest.mark.parametrize("budget", [64, 120, 200, 400, 1024])
def test_summary_fits_its_token_size(budget):
    draft = ExtractiveSummarizer(COUNTER).summarize_messages(trip(), max_tokens=budget)
    assert draft.token_count == COUNTER.count(draft.text) <= budget
    assert draft.content.summary.strip()
    assert draft.text == render_summary(draft.content)
    assert draft.model == "extractive" and draft.engine == "extractive"
    assert draft.token_counter == "o200k_base"


def test_kept_sentences_are_verbatim():
    draft = ExtractiveSummarizer(COUNTER).summarize_messages(trip(), max_tokens=400)
    source = sentences_of(trip())
    lines = draft.content.summary.splitlines() + list(draft.content.facts)
    for line in lines:
        _speaker, _, text = line.partition(": ")
        for piece in text.split(" … "):
            assert piece in source, piece


def test_facts_hold_numbers_dates_and_names():
    draft = ExtractiveSummarizer(COUNTER).summarize_messages(trip(), max_tokens=400)
    facts = " ".join(draft.content.facts)
    assert "March 14" in facts
    assert "€" in facts
    assert all(
        any(ch.isdigit() for ch in f) or any(w[:1].isupper() for w in f.split()[1:])
        for f in draft.content.facts
    )


def test_open_questions_are_the_unanswered_ones():
    draft = ExtractiveSummarizer(COUNTER).summarize_messages(trip(), max_tokens=600)
    questions = " ".join(draft.content.open_questions)
    assert "parking" in questions  # answered with "I don't know"
    assert "airport" in questions  # never answered
    assert "Sintra" not in questions  # answered by the next message
    assert "restaurant tips" not in questions


def test_long_input_stays_bounded_and_keeps_entities():
    messages = [
        SourceMessage(
            seq=i,
            role="user" if i % 2 else "assistant",
            author="A" if i % 2 else "",
            content=f"Filler sentence number {i} talks about nothing in particular. "
            f"Reminder: ticket CHG-{i} closes on 2025-04-{(i % 28) + 1:02d}.",
        )
        for i in range(1, 600)
    ]
    draft = ExtractiveSummarizer(COUNTER).summarize_messages(messages, max_tokens=300)
    assert draft.token_count <= 300
    assert "CHG-" in draft.text


def test_multilingual_text_does_not_break_it():
    messages = [
        SourceMessage(1, "user", "Привет! Встреча перенесена на четверг, 14 марта, в Киеве."),
        SourceMessage(2, "assistant", "Зрозуміло, я оновлю календар. Бюджет 5000 гривень?"),
        SourceMessage(3, "user", "東京の会議は木曜日に変更されました。予算を確認してください。"),
        SourceMessage(4, "assistant", "Verstanden. Das Treffen ist am Donnerstag in Berlin."),
    ]
    draft = ExtractiveSummarizer(COUNTER).summarize_messages(messages, max_tokens=150)
    assert draft.token_count <= 150
    assert draft.content.summary


def test_a_single_huge_sentence_is_cut_visibly_to_fit():
    messages = [SourceMessage(1, "user", "word " * 5000)]
    draft = ExtractiveSummarizer(COUNTER).summarize_messages(messages, max_tokens=64)
    assert draft.token_count <= 64
    assert draft.content.summary.endswith("…")


def test_nothing_to_summarise_fails():
    with pytest.raises(SummaryFailed):
        ExtractiveSummarizer(COUNTER).summarize_messages(
            [SourceMessage(1, "user", "   ")], max_tokens=100
        )


def test_merge_combines_summaries_within_size():
    engine = ExtractiveSummarizer(COUNTER)
    first = engine.summarize_messages(trip()[:4], max_tokens=200)
    second = engine.summarize_messages(trip()[4:], max_tokens=200)
    merged = engine.merge_summaries(
        [SourceSummary(1, 4, first.content), SourceSummary(5, 7, second.content)], max_tokens=200
    )
    assert merged.token_count <= 200
    assert merged.content.summary


def test_merge_drops_questions_a_later_summary_answers():
    older = StructuredSummary(
        summary="Ada asked about the hotel.",
        open_questions=("Ada: Does the Pestana hotel have parking?",),
    )
    newer = StructuredSummary(
        summary="Assistant: The Pestana hotel has parking for guests at €15 per day."
    )
    merged = ExtractiveSummarizer(COUNTER).merge_summaries(
        [SourceSummary(1, 10, older), SourceSummary(11, 20, newer)], max_tokens=300
    )
    assert not merged.content.open_questions
