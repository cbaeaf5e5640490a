"""Titles made from a first exchange hold plain words, whatever markdown the messages use:
no table pipes, headings, emphasis, code, HTML or link targets."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chats.services.titles import TITLE_CHARS, title_from_exchange, title_from_text

TABLE = "| Name | Age |\n|---|---|\n| Bob | 3 |\n| Ann | 5 |"


@pytest.mark.parametrize(
    ("text", "title"),
    [
        (f"{TABLE}\n\nCompare these two people. Thanks", "Compare these two people"),
        (TABLE, "Name, Age"),
        ("| a | b |", "a, b"),
        ("| a | b |\n| 1 | 2 |\nWhich is larger?", "Which is larger?"),
        ("Name | Age\n--- | ---\nBob | 3", "Name, Age"),
        ("cats | dogs", "cats dogs"),
        ("# **Bold** _heading_ with `code`", "Bold heading with code"),
        ("Setext title\n============\nbody", "Setext title"),
        ("~~~\nprint(1)\n~~~\nAfter the fence", "After the fence"),
        ("```python\nx = 1\n```\n```\nmore code\n```\nFinally prose", "Finally prose"),
        ("    indented code\n\nReal text", "Real text"),
        ("<script>alert(1)</script>\n\nHello there", "Hello there"),
        ("Hi <img src=x onerror=alert(1)> there", "Hi there"),
        ("<!-- a comment -->\nVisible words", "Visible words"),
        ("[Click **here**](javascript:alert(1)) now", "Click here now"),
        ("![a *cat* photo](http://x/cat.png)", "a cat photo"),
        ("***\n---\n> > Nested quote. More", "Nested quote"),
        ("- [ ] buy milk\n- [x] eggs", "buy milk"),
        ("1) first point", "first point"),
        ("**unclosed bold and ~~strike", "unclosed bold and strike"),
        ("A footnote[^1] here", "A footnote here"),
        (r"Escaped \*stars\* and \| pipes", "Escaped stars and pipes"),
        ("<https://example.com/page>", "https://example.com/page"),
        ("```\nan unclosed fence\n| a | b |", ""),
        ("|---|---|", ""),
    ],
)
def test_markdown_shapes_leave_plain_words(text, title):
    assert title_from_text(text) == title


def test_the_reply_names_a_table_before_a_table_names_anything():
    assert title_from_exchange(TABLE, "These are the ages. Bob is younger.") == (
        "These are the ages"
    )
    assert title_from_exchange(TABLE, "| Count |\n|---|\n| 2 |") == "Name, Age"
    assert title_from_exchange("", "| Count |\n|---|\n| 2 |") == "Count"
    assert title_from_exchange("```\ncode\n```", "") == ""


MARKDOWN_PIECES = st.sampled_from(
    [
        "|",
        "-",
        "*",
        "_",
        "`",
        "#",
        ">",
        "[",
        "]",
        "(",
        ")",
        "!",
        "~",
        "<",
        ">",
        "\\",
        ":",
        "=",
        "\n",
        " ",
        "word",
        "Title",
        "x",
        "1.",
        "<b>",
        "</b>",
        "```",
        "---",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(MARKDOWN_PIECES, max_size=60).map("".join))
def test_no_markup_survives_in_any_title(text):
    title = title_from_text(text)
    assert len(title) <= TITLE_CHARS
    # (Inline code is kept as words: `<b>` in backticks names a title "<b>".)
    assert not any(mark in title for mark in ("|", "`", "*", "~~", "__", "\n"))
    assert title == "" or any(ch.isalnum() for ch in title)
