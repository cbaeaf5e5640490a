"""The kinds of memory the platform keeps of a user, one registry entry each.

A *fact* is something about the user ("lives in Lyon"): saved by the model's tools, the user
or the API, replaced by a newer value of the same key. A *standing instruction* tells the
assistant how to answer from now on ("Always include version numbers"); a *preference*
states what the user prefers ("I prefer minimal dependencies"). Instructions and preferences
are noticed in the user's own messages (:mod:`.instructions`), kept in the user's own words,
replaced by a later statement on the same matter, and sent in every prompt of that user in a
section of their own (``instructions``), before the facts.

Everything else asks :func:`memory_kind_for` what a kind does: which prompt section it goes
to, its label, how a newer item replaces an older one, and what it finds in a message.
Pure: nothing here imports Django.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .instructions import (
    INSTRUCTION,
    PREFERENCE,
    referred_preference,
    restates,
    same_matter,
    standing_statements,
)

MemoryKindName = Literal["fact", "instruction", "preference"]
#: The prompt sections memories go to, in the order they are packed and rendered.
MemorySection = Literal["instructions", "facts"]
FACT: MemoryKindName = "fact"


class UnknownMemoryKind(KeyError):
    """A memory kind no registry entry answers for."""


@dataclass(frozen=True, slots=True)
class Found:
    """What a message states that a memory kind keeps: the sentence in the user's words (one
    cut from a longer sentence closed by a full stop, :attr:`~.instructions.Statement.text`)
    and where those words stand in the message."""

    kind: MemoryKindName
    sentence: str
    start: int
    end: int


@dataclass(frozen=True)
class MemoryKind:
    """One kind of memory: what it is called, where it goes in a prompt, how a newer one
    replaces an older one, and its shortest form."""

    name: MemoryKindName
    label: str
    plural: str
    #: The prompt section it is sent in.
    section: MemorySection
    #: Where a section that cannot hold all of its memories keeps them: lower first (then
    #: newest first).
    keep_order: int = 0

    def replaces(self, earlier: str, later: str) -> bool:
        """Whether ``later`` (same kind, same user, no key) replaces ``earlier``. Facts are
        replaced by key only (an unkeyed fact never replaces another)."""
        return False

    def restated_by(self, earlier: str, later: str) -> bool:
        """Whether ``later`` only points back to ``earlier`` and adds nothing to keep (it is
        then not kept beside it)."""
        return False

    def shortest_form(self, text: str) -> str:
        """The shortest form of a kept ``text`` still in the user's own words, for a prompt
        with no room for all of it (a kept message: the sentences that state it)."""
        return text


@dataclass(frozen=True)
class _Standing(MemoryKind):
    """Standing instructions and preferences: one matter, one current statement, noticed in
    the user's own messages without a model (:func:`standing_statements_in`)."""

    def replaces(self, earlier: str, later: str) -> bool:
        return same_matter(matter_of(earlier), matter_of(later))

    def restated_by(self, earlier: str, later: str) -> bool:
        # Most sentences name no earlier preference: the kept one is not read for them.
        return referred_preference(later) is not None and restates(matter_of(earlier), later)

    def shortest_form(self, text: str) -> str:
        return matter_of(text)


MEMORY_KINDS: dict[str, MemoryKind] = {
    kind.name: kind
    for kind in (
        MemoryKind(FACT, "Fact", "Facts", "facts"),
        # An instruction is asked for in so many words ("always...", "from now on...") and
        # is short; a preference is often said in passing within a request.
        _Standing(INSTRUCTION, "Instruction", "Instructions", "instructions", keep_order=0),
        _Standing(PREFERENCE, "Preference", "Preferences", "instructions", keep_order=1),
    )
}
MEMORY_KIND_NAMES: tuple[MemoryKindName, ...] = tuple(MEMORY_KINDS)  # type: ignore[arg-type]
#: The kinds sent in the ``instructions`` section.
STANDING_KINDS: tuple[MemoryKindName, ...] = tuple(
    k.name for k in MEMORY_KINDS.values() if k.section == "instructions"
)


def matter_of(text: str) -> str:
    """What a standing instruction or preference is about: the statements its text makes
    (a kept message may say more around them), else the whole text."""
    found = standing_statements(text)
    return " ".join(s.text for s in found) if found else text


def memory_kind_for(name: str) -> MemoryKind:
    """The registry entry of ``name``; :class:`UnknownMemoryKind` for any other."""
    try:
        return MEMORY_KINDS[name]
    except KeyError:
        raise UnknownMemoryKind(
            f"unknown memory kind {name!r}: one of {', '.join(MEMORY_KINDS)}"
        ) from None


def memory_kind_choices() -> list[tuple[str, str]]:
    """``(name, label)`` of every kind, for a model field's choices."""
    return [(k.name, k.label) for k in MEMORY_KINDS.values()]


def standing_statements_in(text: str) -> list[Found]:
    """Every instruction and preference a user's message states, in the order they stand: the
    detector runs once over the message (it runs on every message a user sends), not once per
    kind."""
    return [
        Found(s.kind, s.text, s.start, s.end)
        for s in standing_statements(text)
        if s.kind in MEMORY_KINDS
    ]
