"""Standing instructions and preferences found in a message without a model, verbatim, in
the languages the estimator knows; sentences about the user's habits, questions about the
assistant's taste and hypotheses are not."""

from __future__ import annotations

import pytest

from chatplatform.core.memory.instructions import (
    MAX_STATEMENT_CHARS,
    referred_preference,
    restates,
    same_matter,
    standing_statements,
)


@pytest.mark.parametrize(
    ("text", "kind", "sentence"),
    [
        (
            "Thanks! Always include version numbers when I ask about libraries. ->-> 2,26",
            "instruction",
            "Always include version numbers when I ask about libraries.",
        ),
        (
            "Please never use emojis in answers.",
            "instruction",
            "Please never use emojis in answers.",
        ),
        ("From now on, reply in Spanish", "instruction", "From now on, reply in Spanish"),
        ("Answer me only in German please.", "instruction", "Answer me only in German please."),
        (
            "My app is 2.5MB, so I prefer light libraries, can you help?",
            "preference",
            "My app is 2.5MB, so I prefer light libraries",
        ),
        ("I'd rather have short answers.", "preference", "I'd rather have short answers."),
        (
            "I've set a preference for CPU-only deployment, despite slower inference.",
            "preference",
            "I've set a preference for CPU-only deployment, despite slower inference.",
        ),
        (
            "As stated in my preference for pragmatic security, keep it fast. Ideas?",
            "preference",
            "As stated in my preference for pragmatic security, keep it fast.",
        ),
        (
            "Никогда не используй markdown. Спасибо!",
            "instruction",
            "Никогда не используй markdown.",
        ),
        ("Відтепер відповідай українською.", "instruction", "Відтепер відповідай українською."),
        ("Je préfère des réponses courtes.", "preference", "Je préfère des réponses courtes."),
        ("Siempre responde con ejemplos.", "instruction", "Siempre responde con ejemplos."),
        ("Ich bevorzuge kurze Antworten.", "preference", "Ich bevorzuge kurze Antworten."),
        ("以后请用中文回答。谢谢", "instruction", "以后请用中文回答。"),
        ("我更喜欢简洁的回答。", "preference", "我更喜欢简洁的回答。"),
        ("앞으로 존댓말로 대답해 주세요.", "instruction", "앞으로 존댓말로 대답해 주세요."),
    ],
)
def test_found_verbatim_with_their_place_in_the_message(text, kind, sentence):
    (found,) = standing_statements(text)
    assert (found.kind, found.sentence) == (kind, sentence)
    assert text[found.start : found.end] == sentence


@pytest.mark.parametrize(
    "text",
    [
        "I always forget my keys.",
        "Never mind, it works now.",
        "Which do you prefer, tabs or spaces?",
        "If I prefer tabs, what changes?",
        "Do you have a preference for tabs?",
        "What is my preference for dates again?",
        "The API answers in 250 ms now.",
        "Can you help me with my CV?",
        "How do these metrics differ from recall, and when might I prefer to use them?",
        "Should I prefer Redis or Memcached here?",
        "",
    ],
)
def test_habits_questions_and_hypotheses_are_not_standing(text):
    assert standing_statements(text) == []


def test_a_run_on_sentence_keeps_the_clauses_around_each_statement_it_makes():
    # A message pasted as one sentence of thousands of characters: each statement is kept
    # as the clauses around it, within the limit, verbatim and where it stands.
    filler = ", and I've planned the sprint for the login page with tests"
    text = (
        "I've set up the Flask app" + filler * 8 + ", and I prefer simple, minimal "
        "dependencies to keep the app lightweight" + filler * 8 + ", and always include "
        "version numbers when I ask about libraries" + filler * 8 + " ->-> 2,5"
    )
    found = standing_statements(text)
    assert [s.kind for s in found] == ["preference", "instruction"]
    assert "I prefer simple, minimal dependencies to keep the app lightweight" in found[0].sentence
    assert "always include version numbers when I ask about libraries" in found[1].sentence
    for s in found:
        assert len(s.sentence) <= MAX_STATEMENT_CHARS
        assert text[s.start : s.end] == s.sentence
        assert not s.sentence.startswith((",", " ")) and not s.sentence.endswith((",", " "))


def test_a_run_on_sentence_in_chinese_splits_at_its_own_commas():
    text = "我在做一个天气应用，" * 40 + "我更喜欢简单的依赖，" + "我们用的是Flask，" * 40
    (found,) = standing_statements(text)
    assert found.kind == "preference"
    assert found.sentence.startswith("我更喜欢简单的依赖")
    assert len(found.sentence) <= MAX_STATEMENT_CHARS
    assert text[found.start : found.end] == found.sentence


def test_a_statement_in_one_long_clause_is_kept_from_shortly_before_it():
    text = " ".join(["word"] * 120) + " I prefer tabs over spaces " + " ".join(["more"] * 120)
    (found,) = standing_statements(text)
    assert "I prefer tabs over spaces" in found.sentence
    assert len(found.sentence) <= MAX_STATEMENT_CHARS
    assert text[found.start : found.end] == found.sentence


def test_two_statements_in_one_message():
    text = "Always cite sources when I ask about history. I prefer APA style. What about Rome?"
    assert [s.kind for s in standing_statements(text)] == ["instruction", "preference"]


def test_a_later_statement_on_the_same_matter_replaces_the_earlier_one():
    bullets = "Always use bullet points for lists when I ask about formatting options."
    assert same_matter(bullets, "Never use bullet points for lists when I ask about formatting.")
    assert not same_matter(bullets, "Always include version numbers when I ask about libraries.")
    assert not same_matter("Always answer.", "Never answer.")  # no content words: no match
    # The same request for questions of another kind: both stay, each for its own.
    deadlines = "Always format dates in the month-day-year style when I ask about deadlines."
    assert not same_matter(
        deadlines, 'Always format dates as "Month Day, Year" when I ask about timeline details.'
    )
    assert same_matter(
        deadlines, "Always format dates in the day-month-year style when I ask about deadlines."
    )
    assert not same_matter(
        "Immer Datumsangaben im Format Tag.Monat.Jahr, wenn ich nach Fristen frage.",
        "Immer Datumsangaben im Format Tag.Monat.Jahr, wenn ich nach Terminen frage.",
    )
    # One topic, two matters: both stay.
    assert not same_matter(
        "Always include visual aids like tree diagrams when I ask about probability problems.",
        "Always combine algebraic formulas with visual diagrams for complex probability problems.",
    )


def test_statements_naming_another_language_are_on_the_same_matter():
    assert same_matter("From now on, answer me in Spanish.", "Always reply in German.")
    assert not same_matter("Answer me in Spanish.", "Never use emojis in answers.")


def test_a_sentence_that_points_back_to_a_preference_restates_it():
    modular = "I prefer a modular design that separates the detection and API layers."
    later = "Can you write the Detector class, considering my preference for modular design?"
    assert referred_preference(later) == "modular design"
    assert restates(modular, later)
    assert not restates("I prefer tabs over spaces.", later)  # it names another matter
    pkce = "How do I upgrade, considering I prefer OAuth 2.0 PKCE for secure token exchange?"
    assert referred_preference(pkce) == "OAuth 2.0 PKCE for secure token exchange"
    # A sentence that also states a preference of its own is no mere reference.
    own = "I prefer short answers, given my preference for modular design."
    assert referred_preference(own) is None and not restates(modular, own)
    assert referred_preference(modular) is None


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        (
            "I prefer writing in the mornings between 7-9 AM, as I'm most focused then, can you "
            "help me create a schedule for my statement? ->-> 1,16",
            "I prefer writing in the mornings between 7-9 AM, as I'm most focused then",
        ),
        (
            "I prefer OAuth 2.0 PKCE for public clients, so how do I set it up in Flask?",
            "I prefer OAuth 2.0 PKCE for public clients",
        ),
        ("Always use metric units, so could you redo the table?", "Always use metric units"),
        (
            "Je préfère des réponses courtes, pouvez-vous m'aider ?",
            "Je préfère des réponses courtes",
        ),
        # A request before the statement, or nothing left of it before the request: kept whole.
        ("Can you help me, I prefer short answers.", "Can you help me, I prefer short answers."),
        ("I prefer, can you help me?", "I prefer, can you help me?"),
        # A clause that goes on with the statement, or doubts it, is kept.
        (
            "I prefer the quiet library, but I'm not sure it's best for minimizing distractions",
            "I prefer the quiet library, but I'm not sure it's best for minimizing distractions",
        ),
        (
            "I prefer Redis, as it is fast, and I want the cache shared.",
            "I prefer Redis, as it is fast, and I want the cache shared.",
        ),
    ],
)
def test_a_statement_ends_before_the_messages_own_request(text, sentence):
    (found,) = standing_statements(text)
    assert found.sentence == sentence
    assert text[found.start : found.end] == sentence
    # Kept and shown as a sentence of its own: closed when it was cut.
    assert found.text == (sentence if found.sentence == text.strip() else sentence + ".")


def test_a_run_on_statement_ends_before_a_request_clause():
    text = (
        "I have been working on the parser for days, and it handles tables, lists and quotes, " * 12
        + "and I prefer short functions, can you split this one for me"
    )
    assert len(text) > MAX_STATEMENT_CHARS
    (found,) = standing_statements(text)
    assert found.sentence == "and I prefer short functions"
    assert found.text == "and I prefer short functions."


def test_a_cut_chinese_statement_is_closed_with_its_own_full_stop():
    (found,) = standing_statements("我更喜欢简洁的回答，你能帮我改写这段吗？")
    assert found.sentence == "我更喜欢简洁的回答"
    assert found.text == "我更喜欢简洁的回答。"
