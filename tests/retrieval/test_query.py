"""The search query builder (pure): scripts, stop words, stemming, sanitising."""

from __future__ import annotations

import importlib
import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chats.retrieval.query import (
    FOLD_FROM,
    FOLD_TO,
    build_query,
    detect_stop_languages,
    estimated_matches,
    fold,
    folded_words,
    stem,
    whole_history_terms,
    words_of,
)


def texts(query):
    return [t.text for t in query.terms]


def test_english_question_keeps_content_words_as_prefix_stems():
    q = build_query("When did Melanie paint a sunrise?")
    assert texts(q) == ["melani", "paint", "sunris"]
    assert all(t.prefix for t in q.terms)
    assert q.tsquery() == "'melani':* | 'paint':* | 'sunris':*"
    assert q.fts5() == '"melani"* OR "paint"* OR "sunris"*'


@pytest.mark.parametrize(
    ("question", "terms"),
    [
        ("What does Jon tell Gina he won't do?", ["jon", "gina"]),
        ("What does Melanie think about Caroline's decision to adopt?",
         ["melani", "carolin", "decis", "adopt"]),
        ("What did Gina say about the dancers?", ["gina", "danc"]),
        ("He told me what he thought", []),
    ],
)  # fmt: skip
def test_verbs_of_reported_speech_are_not_searched(question, terms):
    """Every message is something someone said: "say", "tell", "think" name the act, not
    its content (tooling/evaluation/retrieval.md: +1-2 single-hop questions at both budgets)."""
    assert texts(build_query(question)) == terms


@pytest.mark.parametrize(
    ("word", "root"),
    [
        ("painting", "paint"),
        ("painted", "paint"),
        ("adoption", "adopt"),
        ("kids", "kid"),
        ("art", "art"),
        ("поддержки", "поддержк"),
        ("группу", "групп"),
        ("2023", "2023"),
    ],
)
def test_light_stemming(word, root):
    assert stem(word) == root


def test_cyrillic_stop_words_and_stems():
    q = build_query("Когда Каролина ходила в группу поддержки?")
    assert "в" not in texts(q) and "когда" not in texts(q)
    assert {"групп", "поддержк"} <= set(texts(q))


def test_stop_lists_follow_the_language_of_the_query():
    # "son", "war", "die" are stop words in French / German, not in an English question.
    q = build_query("Where did my son go to war and why did the plant die?")
    assert detect_stop_languages(words_of("where did my son go to war")) == ("en",)
    assert {"son", "war", "die"} <= set(texts(q))
    assert "did" not in texts(q)
    german = build_query("Wann war die Hochzeit von Anna?")
    assert texts(german) == ["hochzeit", "anna"]


def test_cjk_becomes_character_bigrams():
    q = build_query("我喜欢吃苹果")
    assert [t.text for t in q.terms] == ["我喜", "喜欢", "欢吃", "吃苹", "苹果"]
    assert all(t.bigram for t in q.terms)
    assert "'苹' <-> '果'" in q.tsquery()
    assert q.fts5() == ""  # SQLite answers bigrams with its bounded scan instead
    korean = build_query("학교에서 만나요")
    assert "학교" in texts(korean)


def test_mixed_scripts_and_accents_fold():
    q = build_query("Où est le café de Jérôme? Tokyo 東京")
    assert texts(q) == ["cafe", "jerom", "tokyo", "東京"]
    assert fold("ÉCOLE Ёлка") == "ecole елка"


@pytest.mark.parametrize(
    "text",
    ["", "   ", "the of and to", "?!...", "\"*:&|!()'\\", "a b c", "\x00\x00", "我"],
)
def test_queries_with_nothing_searchable_are_empty_or_safe(text):
    q = build_query(text)
    for term in q.terms:
        assert term.text.isalnum()
    if text in ("", "   ", "the of and to", "?!...", "\"*:&|!()'\\", "a b c", "\x00\x00"):
        assert q.is_empty
        assert q.tsquery() == "" and q.fts5() == ""


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_rendered_queries_only_hold_letters_digits_and_our_operators(text):
    q = build_query(text)
    assert len(q.terms) <= 32
    for term in q.terms:
        assert term.text and all(ch.isalnum() for ch in term.text)
        assert "'" not in term.text and '"' not in term.text


def test_fold_table_matches_the_migration_copy():
    migration = importlib.import_module("chats.migrations.0002_message_search")
    assert migration.FOLD_FROM == FOLD_FROM
    assert migration.FOLD_TO == FOLD_TO
    assert len(FOLD_FROM) == len(FOLD_TO)


def test_without_drops_names_and_their_stems():
    q = build_query("What did Caroline paint?")
    assert texts(q.without(["Caroline"])) == ["paint"]


_REFERENCE_FOLD = str.maketrans(FOLD_FROM, FOLD_TO)
_PLAIN_WORD = re.compile(r"[^\W_]+")
_CJK_CHAR = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def _reference_fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).lower().translate(_REFERENCE_FOLD)


def _reference_words(text: str) -> list[str]:
    """Runs of letters and digits, each Han/Kana/Hangul character a word of its own."""
    out: list[str] = []
    for word in _PLAIN_WORD.findall(_reference_fold(text)):
        run = ""
        for char in word:
            if _CJK_CHAR.match(char):
                out += [run] if run else []
                out.append(char)
                run = ""
            else:
                run += char
        out += [run] if run else []
    return out


@settings(max_examples=400, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(
            list("aZé_ -.\n1ÀÉЁёж中文カタ・゛゠한국٣ıİẞß\u0301") + list(FOLD_FROM)
        ),
        max_size=30,
    )
    | st.text(max_size=30)
)
def test_fold_and_words_match_their_plain_definitions(text):
    # The fast paths (ASCII, one scan for the folded characters, one tokenising expression)
    # give what folding every character and splitting every word give.
    assert fold(text) == _reference_fold(text)
    assert words_of(text) == _reference_words(text)
    assert folded_words(fold(text)) == words_of(text)


def test_common_terms_are_pruned_rarest_first():
    # 100,000 messages, 2,000 sampled: 390 sampled hits estimate 19,500 matches.
    def kept(*hits):
        return whole_history_terms(hits, sampled=2000, total=100_000, scan_limit=5000)

    # decide and release are common, budget never sampled: only budget is matched everywhere
    assert kept(390, 390, 0) == {2}
    # rarest first while the estimated matches (500, 2,000, 3,000, 25,000) fit 5,000
    assert kept(10, 40, 60, 500) == {0, 1}
    assert kept(60, 10, 500, 40) == {1, 3}
    # all fit: nothing pruned; every term common: nothing pruned either (no term is rarer)
    assert kept(10, 20, 30) == {0, 1, 2}
    assert kept(300, 390) == {0, 1}
    assert kept() == frozenset()


def test_a_sample_of_the_whole_conversation_counts_exactly():
    assert estimated_matches(7, sampled=300, total=300) == 7
    assert estimated_matches(7, sampled=300, total=120) == 7
    assert estimated_matches(7, sampled=2000, total=100_000) == 350
    assert estimated_matches(7, sampled=0, total=100) == 0
    # a conversation no longer than the scan is never pruned (the scan keeps every match)
    assert whole_history_terms([300, 300], sampled=300, total=300, scan_limit=400) == {0, 1}


@pytest.mark.parametrize(
    ("question", "person"),
    [
        ("Which versions did I say I was using?", "asker"),
        ("What deadline did I set for my project?", "asker"),
        ("How did you recommend handling the delays?", "addressee"),
        ("How did you suggest improving my app?", "both"),
        ("What did Caroline paint?", None),
        ("Что я говорил о проекте?", "asker"),
        ("Was habe ich über mein Projekt gesagt?", "asker"),
        ("Remind me about the paella recipe", None),  # the object of a request
    ],
)
def test_a_question_says_whom_it_is_about(question, person):
    # Its pronouns are stop words, left out of the terms, but they tell whose messages the
    # answer is in: the asker's own (I, my) or the one asked (you).
    query = build_query(question)
    assert query.person == person
    assert not {"i", "my", "you", "я"} & {t.text for t in query.terms}
    assert query.without(["versions"]).person == person


@pytest.mark.parametrize(
    ("question", "recalls"),
    [
        ("How did you recommend handling the delays?", True),
        ("What approach have you suggested for my resume?", True),
        ("Was hast du mir für das Projekt empfohlen?", True),
        ("Qu'avez-vous conseillé pour mon application ?", True),
        ("Qu'est-ce que tu as proposé hier ?", True),
        ("What approaches would you suggest I explore?", False),  # advice now
        ("Did I tell you about my dog?", False),  # what the asker said
        ("What did Caroline paint?", False),
    ],
)
def test_a_question_says_whether_it_recalls_a_reply(question, recalls):
    # A past tense addressed to the one asked is about its earlier reply, not new advice.
    query = build_query(question)
    assert query.recalls_reply is recalls
    assert query.without(["approach"]).recalls_reply is recalls
