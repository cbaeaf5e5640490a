"""Feature extraction: values, scripts and the shapes BPE cares about."""

from __future__ import annotations

import pytest

from chatplatform.core.tokens.features import FEATURE_NAMES, extract_features

LEXICON = frozenset({b"hello", b"world", b"the", b"First", b"Search", b"breadth"})


def features(text: str) -> dict[str, float]:
    values = extract_features(text, LEXICON)
    assert len(values) == len(FEATURE_NAMES)
    return {name: value for name, value in zip(FEATURE_NAMES, values, strict=True) if value}


def test_empty_text_has_no_features():
    assert features("") == {}


def test_lexicon_words_and_out_of_lexicon_letters():
    found = features("hello wonderful world")
    assert found["lexicon_words"] == 2
    assert found["oov_words"] == 1
    assert found["latin_chars"] == len("wonderful")
    assert found["latin_runs_ge4"] == 1
    assert found["latin_runs_ge8"] == 1


def test_camel_case_parts_are_looked_up():
    found = features("breadthFirstSearch")
    assert found["lexicon_words"] == 3
    assert found["camel_humps"] == 2
    assert "oov_words" not in found


def test_punctuation_runs_by_what_follows():
    found = features("a.b (c);\nd, e")
    # ".b" before a letter, ");" before a newline, "," before a blank; "(" before a letter
    assert found["punct_runs_before_letter"] == 2
    assert found["punct_runs_before_newline"] == 1
    assert found["punct_runs_other"] == 1


def test_digits_newlines_and_blanks():
    found = features("x 1234567 y\n\n\n    z\tw")
    assert found["digit_runs"] == 1
    assert found["digit_runs_ge4_ge7"] == 2  # 123 456 7: three groups, one run
    assert "digit_runs_ge10" not in found
    assert features("12345678901")["digit_runs_ge10"] == 1
    assert found["newline_runs_not_after_punct"] == 1
    assert found["newlines"] == 3
    assert found["space_runs_ge2"] == 1
    assert found["tabs"] == 1


@pytest.mark.parametrize(
    ("text", "feature", "chars"),
    [
        ("Привет мир", "cyrillic_chars", 9),
        ("Καλημέρα", "greek_chars", 8),
        ("Բարեւ", "armenian_chars", 5),
        ("გამარჯობა", "georgian_chars", 9),
        ("שלום עולם", "hebrew_chars", 8),
        ("مرحبا", "arabic_chars", 5),
        ("नमस्ते", "devanagari_chars", 6),
        ("வணக்கம்", "indic_chars", 7),
        ("สวัสดี", "thai_chars", 6),
        ("안녕하세요", "hangul_chars", 5),
        ("中文文本", "han_chars", 4),
        ("ひらがな", "kana_chars", 4),
    ],
)
def test_scripts_are_told_apart(text, feature, chars):
    assert features(text)[feature] == chars


def test_vietnamese_letters_stay_latin():
    found = features("Việt Nam")
    assert "other_chars" not in found and "georgian_chars" not in found
    assert found["latin_chars"] == len("ViệtNam")


def test_symbols_and_emoji():
    found = features("«ok» — 😀")
    assert found["latin1_symbols"] == 2
    assert found["general_symbols"] == 1
    assert found["astral_chars"] == 1


def test_kana_and_cjk_punctuation_by_second_byte():
    found = features("ひらがな、カタカナ。漢字")
    assert found["kana_chars"] == 8
    assert found["cjk_punct"] == 2
    assert found["han_chars"] == 2


def test_blank_runs_and_tabs():
    assert "space_runs_ge2" not in features("a b\tc")
    found = features("a  b\t\tc   d")
    assert found["space_runs_ge2"] == 3
    assert found["tabs"] == 2


def test_lone_surrogates_do_not_crash():
    assert all(value >= 0 for value in extract_features("a\ud800b", LEXICON))


def test_url_encoded_bytes_are_counted_and_taken_out():
    found = features("wiki/%D0%A1%D0%B8_x")
    assert found["percent_escapes"] == 4
    assert "digit_runs" not in found
    assert features("%41%42") == {"percent_escapes": 2}


def test_cyrillic_beyond_the_russian_alphabet():
    assert "cyrillic_extended" not in features("съешь же этих мягких булок")
    assert features("їжак ґанок")["cyrillic_extended"] == 2
