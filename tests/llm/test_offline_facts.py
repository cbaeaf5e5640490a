"""Facts the offline provider saves: plain first-person statements, nothing else."""

from __future__ import annotations

import pytest

from chatplatform.core.llm.offline_facts import StatedFact, stated_facts
from chatplatform.core.memory.kinds import standing_statements_in


@pytest.mark.parametrize(
    ("message", "fact"),
    [
        (
            "I'm allergic to penicillin",
            StatedFact("The user is allergic to penicillin.", "allergy_penicillin"),
        ),
        ("my name is Ana", StatedFact("The user's name is Ana.", "name")),
        ("I live in Lisbon.", StatedFact("The user lives in Lisbon.", "home_city")),
        ("call me sam", StatedFact("The user wants to be called Sam.", "preferred_name")),
        ("I work as a nurse", StatedFact("The user works as a nurse.", "occupation")),
        ("I’m 34 years old", StatedFact("The user is 34 years old.", "age")),
        ("I love my dog", StatedFact("The user loves their dog.")),
        ("My favourite colour is blue!", StatedFact("The user's favourite colour is blue.")),
        (
            "[Ana Silva (@ana)]: I live in Porto",
            StatedFact("The user lives in Porto.", "home_city"),
        ),
    ],
)
def test_a_plain_statement_is_one_third_person_fact(message: str, fact: StatedFact) -> None:
    assert stated_facts(message) == [fact]


def test_every_statement_of_a_message_counts_once() -> None:
    facts = stated_facts("Hi, my name is Ana and I live in Lisbon. I love jazz! I live in Lisbon.")
    assert [f.text for f in facts] == [
        "The user's name is Ana.",
        "The user lives in Lisbon.",
        "The user loves jazz.",
    ]


@pytest.mark.parametrize(
    "message",
    [
        "From now on, answer in Spanish",
        "I prefer short answers",
        "I prefer minimal dependencies.",
        "I speak Spanish, so always answer in Spanish",
        "I like tea and from now on use metric units",
    ],
)
def test_a_standing_instruction_or_preference_is_not_also_a_fact(message: str) -> None:
    """The instruction kinds keep it in the user's own words; a fact would say it twice."""
    assert standing_statements_in(message)
    assert stated_facts(message) == []


def test_the_facts_around_an_instruction_still_count() -> None:
    facts = stated_facts("I live in Lisbon. From now on, answer in Spanish. I love jazz.")
    assert [f.text for f in facts] == ["The user lives in Lisbon.", "The user loves jazz."]


@pytest.mark.parametrize(
    "message",
    [
        "what is my name?",
        "what is my name",
        "Do I live in Lisbon?",
        "I live in Lisbon?",
        "If I lived in Lisbon I would walk everywhere.",
        "Imagine my name is Bob.",
        "Pretend I'm allergic to cats",
        "Suppose I work as a pilot",
        "I don't live in Lisbon",
        "I'm not allergic to penicillin",
        "My friend says I live in Lisbon",
        "I like it",
        "Tell me a joke",
        "",
    ],
)
def test_questions_hypotheticals_and_small_talk_state_nothing(message: str) -> None:
    assert stated_facts(message) == []


def test_the_tool_input_has_a_key_only_when_the_subject_has_one() -> None:
    assert StatedFact("The user lives in Lisbon.", "home_city").tool_input() == {
        "text": "The user lives in Lisbon.",
        "key": "home_city",
    }
    assert StatedFact("The user loves tea.").tool_input() == {"text": "The user loves tea."}
