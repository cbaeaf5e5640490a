"""The cache-aware layout: in what order the parts of a prompt reach the provider.

What changes rarely comes first, so a provider can cache it: the system prompt, a private
chat's standing instructions and facts, the long-lived then the rolling summaries, and the
retrieved messages that are part of the cached window, all in the system text; then the
history, one content block per turn (so a cache breakpoint can end at any turn) and the new
message; last the *tail*, which only this turn sends (per-turn template values, a group
chat's author's instructions and facts, the earlier instructions the new message concerns
that the cached ones had no room for, the changed facts the new message concerns, this
turn's retrieved messages), appended to the new message.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import eq, itemgetter
from typing import TYPE_CHECKING, NamedTuple

from .formatting import BLOCK_SEPARATOR, CONVERSATION_START, TURN_SEPARATOR
from .types import ItemId

if TYPE_CHECKING:
    # The draft renders itself through this module (``fit``), so the type is only named.
    from .draft import Draft

_content_of = itemgetter("content")


class Rendered(NamedTuple):
    """A prompt in the provider's shape: the system text, the messages, each message's
    content blocks, the tail (also the last block of the last message), and the contents."""

    system: str
    messages: list[dict[str, str]]
    blocks: tuple[tuple[str, ...], ...]
    tail: str
    contents: list[str]
    #: The message each block renders (``None``: the tail, a synthetic start), when the
    #: prompt holds tool calls; empty otherwise.
    block_ids: tuple[tuple[ItemId | None, ...], ...] = ()


def render(d: Draft) -> Rendered:
    """The system text, the provider messages with their blocks, and the tail of ``d``.

    Cached prefix first: the system prompt, a private chat's facts, the summaries; then
    the history and the new message; then the tail, which only this turn sends."""
    multi = d.inputs.multi_user
    system = BLOCK_SEPARATOR.join(
        p
        for p in (
            d.system,
            *([] if multi else d.instructions.blocks),
            *([] if multi else d.facts.blocks),
            *d.summaries.stable_blocks,
            *d.summaries.blocks,
            d.recalled.render(d.inputs.bot_name),
        )
        if p
    )
    tail = BLOCK_SEPARATOR.join(
        p
        for p in (
            d.turn_values,
            *(d.instructions.blocks if multi else []),
            *d.instructions.turn_blocks,
            *(d.facts.blocks if multi else []),
            *d.facts.turn_blocks,
            d.retrieval.render(d.inputs.bot_name),
        )
        if p
    )
    roles, texts = d.history.roles_and_texts()
    roles.append(d.new_turn.role)
    texts.append(d.new_turn.text)
    if turns_alternate(roles):
        # One message per turn (as a rule): the contents are the texts themselves.
        blocks: list[tuple[str, ...]] = [(text,) for text in texts]
        messages = one_message_each(roles, texts)
    else:
        grouped = provider_blocks(roles, texts)
        blocks = [parts for _, parts in grouped]
        messages = [
            {"role": role, "content": TURN_SEPARATOR.join(parts)} for role, parts in grouped
        ]
    if tail:
        blocks[-1] = (*blocks[-1], tail)
        messages[-1] = {
            "role": messages[-1]["role"],
            "content": messages[-1]["content"] + TURN_SEPARATOR + tail,
        }
    block_ids: tuple[tuple[ItemId | None, ...], ...] = ()
    if d.history.tool_groups or d.inputs.new_message.tool_group is not None:
        ids = [record.id for record in d.history.included()]
        ids.append(d.inputs.new_message.id)
        block_ids = turn_block_ids(roles, ids, bool(tail))
    return Rendered(
        system, messages, tuple(blocks), tail, list(map(_content_of, messages)), block_ids
    )


def turn_block_ids(
    roles: Sequence[str], ids: Sequence[ItemId], tail: bool
) -> tuple[tuple[ItemId | None, ...], ...]:
    """The id of the message behind each content block, laid out as :func:`render` lays out
    the blocks of turns with these ``roles`` (``None``: a synthetic start, the ``tail``)."""
    out: list[list[ItemId | None]]
    if turns_alternate(roles):
        out = [[i] for i in ids]
    else:
        out = [[None]] if roles and roles[0] != "user" else []
        previous = "user" if out else ""
        for role, i in zip(roles, ids, strict=True):
            if out and previous == role:
                out[-1].append(i)
            else:
                out.append([i])
            previous = role
    if tail and out:
        out[-1].append(None)
    return tuple(map(tuple, out))


def turns_alternate(roles: Sequence[str]) -> bool:
    """Whether turns of these roles go to the provider as they are, one message each: they
    start with the user and no two neighbours share a role."""
    return bool(roles) and roles[0] == "user" and not any(map(eq, roles, roles[1:]))


def one_message_each(roles: Sequence[str], texts: Sequence[str]) -> list[dict[str, str]]:
    """Provider messages of turns that alternate (:func:`turns_alternate`)."""
    return [{"role": role, "content": text} for role, text in zip(roles, texts, strict=True)]


def provider_blocks(
    roles: Sequence[str], texts: Sequence[str]
) -> list[tuple[str, tuple[str, ...]]]:
    """Alternating provider messages, each as its role and its turns' texts (one content
    block per turn, so a prompt cache can end at any turn): consecutive same-role turns share
    a message; a conversation starting with the assistant gets a synthetic first user turn."""
    out: list[tuple[str, list[str]]] = []
    if roles and roles[0] != "user":
        out.append(("user", [CONVERSATION_START]))
    for role, text in zip(roles, texts, strict=True):
        if out and out[-1][0] == role:
            out[-1][1].append(text)
        else:
            out.append((role, [text]))
    return [(role, tuple(parts)) for role, parts in out]


def provider_messages(roles: Sequence[str], texts: Sequence[str]) -> list[dict[str, str]]:
    """:func:`provider_blocks` with each message's blocks joined into its content."""
    if turns_alternate(roles):  # as a rule: nothing to merge
        return one_message_each(roles, texts)
    return [
        {"role": role, "content": TURN_SEPARATOR.join(parts)}
        for role, parts in provider_blocks(roles, texts)
    ]
