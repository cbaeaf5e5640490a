"""The draft of one assembly: its parts, and the final recount that sheds content until the
rendered prompt fits (see :mod:`chatplatform.core.context.packing` for the order of claims,
:mod:`chatplatform.core.context.layout` for the order the parts are rendered in)."""

from __future__ import annotations

from .budget import BudgetPlan
from .formatting import TurnText, cut_framed, format_turn
from .history import History
from .layout import Rendered, render
from .meter import Meter
from .sections import Picked, Retrieval
from .truncate import truncate_tail
from .types import AssemblyInputs, Excluded, Truncation


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
        self.instructions = Picked("instructions", 0)
        self.facts = Picked("facts", 0)
        self.summaries = Picked("summaries", 0)
        #: Tokens of what the provider request adds beside the rendered text: the provider's
        #: own compaction block (server compaction), sent as it came before the history.
        self.outside_tokens = 0
        #: Retrieved messages that are part of the cached window (rendered in the system).
        self.recalled = Retrieval(0, 0)
        #: This turn's own retrieved messages (rendered in the tail).
        self.retrieval = Retrieval(0, 0)
        self.cuts: dict[str, Truncation] = {}

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
        framed = turn.content != new.content
        if limit is None and not framed:
            content = self.meter.stored(
                "new_message", new.id, new.content, new.tokens, new.counted_by
            )
        else:
            content = self.meter.text(turn.content)  # framed: counted as it is sent
        room = self.plan.room - self.system_tokens if limit is None else limit
        if prefix + content <= room:
            self.new_turn, self.new_tokens = turn, prefix + content
            return
        cut = cut_framed(
            new.content, max(0, room - prefix - 1), self.meter.counter, None if framed else content
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
        out = render(d)
        total = d.count(out.system, out.contents) + d.outside_tokens
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
            shed.excerpts.clear()
        elif d.summaries.included or d.facts.included or d.instructions.included:
            # The user's standing instructions go last, and only with everything optional.
            doomed: tuple[Picked, ...] = (d.summaries, d.facts)
            if not (d.summaries.included or d.facts.included):
                doomed = (d.instructions,)
            for picked in doomed:
                excluded += [Excluded(i.kind, i.id, i.tokens, "recount") for i in picked.included]
                picked.blocks, picked.stable_blocks, picked.included = [], [], []
                picked.turn_blocks = []
                picked.used = 0
            d.outside_tokens = 0
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
