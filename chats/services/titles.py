"""A title for an untitled conversation, made from its first exchange.

When a conversation that has no title gets its first complete reply, it is named after the
first line or sentence of the user's first message (the reply's when the message has no text
of its own, e.g. only an image), as plain words, cut at a word boundary to
:data:`TITLE_CHARS`. The text is parsed as the chat page renders it (CommonMark with tables
and strikethrough, by markdown-it-py) and only the words of its paragraphs and headings are
kept: no code, tables, HTML, link targets, emphasis or list markers. A text that is only a
table is named by its header's cells when neither message has a sentence. The write only
fills an empty title, so running it twice changes nothing and a title the user set is never
overwritten.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from chatplatform.models.conversations import Conversation, Message, MessageRole, Status
from chatplatform.tenancy.scoping import tenant_scope

TITLE_CHARS = 60
#: Characters of a message read to find its first line (titles never need more).
READ_CHARS = 2000


class _TitleMarkdown(MarkdownIt):
    """CommonMark with tables and strikethrough, where a link of any scheme is a link: its
    target is dropped from a title, so none needs refusing (a refused one stays as text)."""

    def validateLink(self, url: str) -> bool:  # markdown-it's name
        return True


_MARKDOWN = _TitleMarkdown("commonmark").enable(["table", "strikethrough"])
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: What markdown leaves as text when it is not markup: unclosed emphasis, a task box, a
#: footnote reference, a pipe of a table row without its delimiter line.
_LEFTOVER_MARKS = re.compile(r"\*+|_{2,}|~{2,}|`+|\[\^[^\]]*\]|\|")
_TASK_BOX = re.compile(r"^\s*\[[ xX]\]\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_TRAILING = ".,;:-–— "


@dataclass(frozen=True)
class _Candidates:
    """The first line of prose of a text, else ("" for prose) its first table's header cells
    joined."""

    prose: str
    table: str


def _words(tokens: Sequence[Token]) -> str:
    """The text of inline tokens: words, inline code and images' alt text; line breaks as
    newlines; HTML tags and link targets dropped."""
    parts: list[str] = []
    for token in tokens:
        if token.type in ("text", "code_inline"):
            parts.append(token.content)
        elif token.type in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif token.type == "image":
            parts.append(_words(token.children or []))
    return "".join(parts)


def _clean(line: str) -> str:
    line = _LEFTOVER_MARKS.sub(" ", _TASK_BOX.sub("", line))
    return " ".join(line.split())


def _has_words(line: str) -> bool:
    return any(ch.isalnum() for ch in line)


def _candidates(text: str) -> _Candidates:
    text = _CONTROL.sub(" ", text[:READ_CHARS].replace("\r\n", "\n").replace("\r", "\n"))
    header: list[str] | None = None  # the first table's header cells, once seen
    in_table = in_head = False
    for token in _MARKDOWN.parse(text):
        if token.type in ("table_open", "table_close"):
            in_table = token.type == "table_open"
        elif token.type in ("thead_open", "thead_close"):
            in_head = token.type == "thead_open" and header is None
            if in_head:
                header = []
        elif token.type != "inline":
            continue  # code, HTML blocks and rules carry no title
        elif in_table:
            if in_head and header is not None:
                header.append(_clean(_words(token.children or [])))
        else:
            for raw in _words(token.children or []).split("\n"):
                if raw.strip().startswith("|"):  # a table row without its delimiter line
                    header = header if header is not None else [_clean(c) for c in raw.split("|")]
                    continue
                line = _clean(raw)
                if _has_words(line):
                    return _Candidates(line, "")
    return _Candidates("", ", ".join(cell for cell in header or [] if _has_words(cell)))


def _sentence(line: str, limit: int) -> str:
    """The first sentence of ``line`` that has words, shortened to ``limit``."""
    first = next((part for part in _SENTENCE_END.split(line) if _has_words(part)), "")
    return _shorten(first, limit) if first else ""


def title_from_text(text: str, limit: int = TITLE_CHARS) -> str:
    """The first line (its first sentence) of ``text`` as plain words, else its first table's
    header cells, at most ``limit`` characters cut at a word boundary (with an ellipsis when
    cut); "" when it has neither."""
    found = _candidates(text)
    return _sentence(found.prose, limit) or _shorten(found.table, limit)


def _shorten(sentence: str, limit: int) -> str:
    sentence = sentence.strip(_TRAILING) if not sentence.endswith("...") else sentence
    if len(sentence) <= limit:
        return sentence
    cut = sentence[: limit - 1]
    if " " in cut and not sentence[limit - 1].isspace():
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(_TRAILING) + "…"


def title_from_exchange(user_text: str, reply_text: str = "") -> str:
    """The title of a conversation whose first message is ``user_text`` and first reply
    ``reply_text``: the message's first sentence, else the reply's, else the header of the
    message's table, else of the reply's."""
    user, reply = _candidates(user_text), _candidates(reply_text)
    return (
        _sentence(user.prose, TITLE_CHARS)
        or _sentence(reply.prose, TITLE_CHARS)
        or _shorten(user.table, TITLE_CHARS)
        or _shorten(reply.table, TITLE_CHARS)
    )


def conversation_title_from_first_exchange(conversation: Conversation) -> str | None:
    """Name the untitled ``conversation`` after its first exchange once it has a complete
    reply. Returns the new title, or None when it was left as it was (titled already, no
    complete reply yet, or nothing to name it by). Idempotent."""
    if conversation.title:
        return None  # titled when it was loaded: no query after every reply of a titled chat
    with tenant_scope(conversation.tenant_id):
        if not Conversation.objects.filter(pk=conversation.pk, title="").exists():
            return None
        reply = (
            Message.objects.filter(
                conversation_id=conversation.pk, role=MessageRole.ASSISTANT, status=Status.COMPLETE
            )
            .order_by("seq")
            .values("content")
            .first()
        )
        if reply is None:
            return None
        first = (
            Message.objects.filter(conversation_id=conversation.pk, role=MessageRole.USER)
            .order_by("seq")
            .values("content")
            .first()
        )
        title = title_from_exchange(
            first["content"] if first else "", reply["content"][:READ_CHARS]
        )
        if not title:
            return None
        # Only an empty title is filled: a rename in the meantime wins. update() leaves
        # updated_at alone: naming the conversation is not activity in it.
        named = Conversation.objects.filter(pk=conversation.pk, title="").update(title=title)
    if not named:
        return None
    conversation.title = title
    return title
