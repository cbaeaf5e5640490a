"""A title for an untitled conversation, made from its first exchange.

When a conversation that has no title gets its first complete reply, it is named after the
first line or sentence of the user's first message (the reply's when the message has no text
of its own, e.g. only an image), without markdown, cut at a word boundary to
:data:`TITLE_CHARS`. The write only fills an empty title, so running it twice changes
nothing and a title the user set is never overwritten.
"""

from __future__ import annotations

import re

from chatplatform.models.conversations import Conversation, Message, Role, Status
from chatplatform.tenancy.scoping import tenant_scope

TITLE_CHARS = 60
#: Characters of a message read to find its first line (titles never need more).
READ_CHARS = 2000

_FENCED_CODE = re.compile(r"```.*?(```|$)", re.DOTALL)
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_LINE_MARKER = re.compile(r"^\s*(#{1,6}\s+|>\s*|[-*+]\s+|\d+[.)]\s+)+")
_EMPHASIS = re.compile(r"(\*{1,3}|_{2,3}|~~|`+)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_TRAILING = ".,;:-–— "


def title_from_text(text: str, limit: int = TITLE_CHARS) -> str:
    """The first line (its first sentence) of ``text`` as plain words, at most ``limit``
    characters cut at a word boundary (with an ellipsis when cut); "" when it has none."""
    text = _FENCED_CODE.sub("\n", text[:READ_CHARS])
    text = _LINK.sub(r"\1", _IMAGE.sub(r"\1", text))
    for raw in text.splitlines():
        line = _EMPHASIS.sub("", _LINE_MARKER.sub("", raw))
        line = " ".join(_CONTROL.sub(" ", line).split())
        if any(ch.isalnum() for ch in line):
            return _shorten(_SENTENCE_END.split(line, maxsplit=1)[0], limit)
    return ""


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
    ``reply_text``: the message's first sentence, else the reply's."""
    return title_from_text(user_text) or title_from_text(reply_text)


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
                conversation_id=conversation.pk, role=Role.ASSISTANT, status=Status.COMPLETE
            )
            .order_by("seq")
            .values("content")
            .first()
        )
        if reply is None:
            return None
        first = (
            Message.objects.filter(conversation_id=conversation.pk, role=Role.USER)
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
