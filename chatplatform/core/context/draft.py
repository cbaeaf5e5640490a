"""The draft of one assembly: its parts, their rendering into the provider's shape, and
the final recount that sheds content until the rendered prompt fits (see
:mod:`chatplatform.core.context.packing` for the order of claims)."""

from __future__ import annotations

from operator import itemgetter
from typing import NamedTuple

from .budget import BudgetPlan
from .formatting import BLOCK_SEPARATOR, TURN_SEPARATOR, TurnText, format_turn
from .history import History, Meter, one_message_each, provider_blocks, turns_alternate
from .sections import Picked, Retrieval
from .truncate import truncate_middle, truncate_tail
from .types import AssemblyInputs, Excluded, Truncation

_content_of = itemgetter("content")


class Rendered(NamedTuple):
    system: str
    messages: list[dict[str, str]]
    blocks: tuple[tuple[str, ...], ...]
    tail: str
    contents: list[str]


class AssemblyError(RuntimeError):
    """The budget cannot hold even the framing (only possible with an invalid policy)."""


class Draft:
    """Mutable state of one assembly, rendered and recounted until it fits."""

    def __init__(
        self, plan: BudgetPlan, meter: Meter, inputs: AssemblyInputs, history: History
    ) -> None:
        self.plan, self.meter, self.inputs, self.history = plan, meter, inputs, history
        self.system = ""
        self.system_tokens = 0
        self.system_full = ""
        self.turn_values = ""
        self.turn_values_tokens = 0
        self.new_turn = TurnText("user", "", "")
        self.new_tokens = 0
        self.facts = Picked("facts", 0)
        self.summaries = Picked("summaries", 0)
        #: Retrieved messages that are part of the cached window (rendered in the system).
        self.recalled = Retrieval(0, 0)
        #: This turn's own retrieved messages (rendered in the tail).
        self.retrieval = Retrieval(0, 0)
        self.cuts: dict[str, Truncation] = {}

    def render(self) -> Rendered:
        """The system text, the provider messages with their blocks, and the tail.

        Cached prefix first: the system prompt, a private chat's facts, the summaries; then
        the history and the new message; then the tail, which only this turn sends."""
        multi = self.inputs.multi_user
        system = BLOCK_SEPARATOR.join(
            p
            for p in (
                self.system,
                *([] if multi else self.facts.blocks),
                *self.summaries.stable_blocks,
                *self.summaries.blocks,
                self.recalled.render(self.inputs.bot_name),
            )
            if p
        )
        tail = BLOCK_SEPARATOR.join(
            p
            for p in (
                self.turn_values,
                *(self.facts.blocks if multi else []),
                self.retrieval.render(self.inputs.bot_name),
            )
            if p
        )
        roles, texts = self.history.roles_and_texts()
        roles.append(self.new_turn.role)
        texts.append(self.new_turn.text)
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
        return Rendered(system, messages, tuple(blocks), tail, list(map(_content_of, messages)))

    def window_used(self) -> int:
        """Tokens of the cached window: its recalled messages and its history."""
        return self.recalled.used + self.history.used

    def count(self, system: str, contents: list[str]) -> int:
        """The recounted total of a rendered prompt (its system text and the contents of
        its messages)."""
        ov, meter = self.meter.overhead, self.meter
        total = self.plan.framing - 2 * ov + (meter.text(system) + ov if system else 0)
        return total + meter.texts(contents) + ov * len(contents)

    def cut_system(self, original: str, original_tokens: int, limit: int) -> None:
        cut = truncate_tail(original, limit, self.meter.counter, total_tokens=original_tokens)
        self.system, self.system_tokens = cut.text, cut.tokens
        if cut.truncated:
            self.cuts["system"] = Truncation("system", "system", original_tokens, cut.tokens)

    def set_new(self, limit: int | None = None) -> None:
        """Fit the new message into ``limit`` (default: all the room the system prompt
        leaves); a given ``limit`` (the final check) recounts instead of trusting its count."""
        new = self.inputs.new_message
        turn = format_turn(new, self.inputs.multi_user)
        prefix = self.meter.small(turn.prefix)
        if limit is None:
            content = self.meter.stored(
                "new_message", new.id, new.content, new.tokens, new.counted_by
            )
        else:
            content = self.meter.text(new.content)
        room = self.plan.room - self.system_tokens if limit is None else limit
        if prefix + content <= room:
            self.new_turn, self.new_tokens = turn, prefix + content
            return
        cut = truncate_middle(
            turn.content, max(0, room - prefix - 1), self.meter.counter, total_tokens=content
        )
        self.new_turn = TurnText(turn.role, turn.prefix, cut.text)
        self.new_tokens = prefix + cut.tokens + 1
        self.cuts["new_message"] = Truncation("new_message", new.id, content, cut.tokens)


def fit(d: Draft, excluded: list[Excluded]) -> tuple[Rendered, int, int]:
    """Render, recount, and shed content until the recounted total fits (module docstring).

    Each round removes history units, a whole optional section, or shrinks the larger of the
    system prompt and the new message (by fresh counts) by more than the overflow, so the
    loop ends; only a budget smaller than the framing itself raises :class:`AssemblyError`.
    """
    trimmed = 0
    while True:
        out = d.render()
        total = d.count(out.system, out.contents)
        if d.plan.fits(total):
            return out, total, trimmed
        over = total - d.plan.limit
        if d.history.count:
            for unit in d.history.drop_oldest(over):
                trimmed += len(unit.items)
                excluded += [
                    Excluded("message", m.id, n, "recount")
                    for m, n in zip(unit.items, unit.per_item, strict=True)
                ]
        elif d.retrieval.entries or d.recalled.entries:
            shed = d.retrieval if d.retrieval.entries else d.recalled
            excluded += [Excluded(i.kind, i.id, i.tokens, "recount") for i in shed.included()]
            shed.entries.clear()
        elif d.summaries.included or d.facts.included:
            for picked in (d.summaries, d.facts):
                excluded += [Excluded(i.kind, i.id, i.tokens, "recount") for i in picked.included]
                picked.blocks, picked.stable_blocks, picked.included = [], [], []
                picked.used = 0
        else:
            system_now = d.meter.text(d.system)
            new_now = d.meter.text(d.new_turn.text)
            if system_now == 0 and new_now == 0:
                raise AssemblyError("the prompt budget cannot hold the framing; check the policy")
            if system_now > new_now:
                full = d.meter.text(d.system_full)
                d.cut_system(d.system_full, full, max(0, system_now - over - 2))
            else:
                d.set_new(max(0, new_now - over - 2))
