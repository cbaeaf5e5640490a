"""The retrieved block prices a candidate by the lines it touches (``Retrieval.add`` keeps the
line costs): whatever the order of additions and removals, what it predicts and what it
holds equal the block priced from scratch (stamps shown once per minute, a gap line between
non-consecutive messages)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from chatplatform.core.context import MessageItem
from chatplatform.core.context.sections import Retrieval

START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def scratch(block: Retrieval) -> int:
    """The block's cost computed from its entries alone (a new block, nothing cached)."""
    fresh = Retrieval(block.cap, block.frame, dict(block.entries), dict(block.stamp_tokens))
    fresh.gap_tokens = block.gap_tokens
    return fresh.used


@st.composite
def steps(draw: st.DrawFn) -> list[tuple[str, list[MessageItem]]]:
    seqs = draw(st.lists(st.integers(1, 60), min_size=1, max_size=30, unique=True))
    items = []
    for seq in seqs:
        minute = draw(st.one_of(st.none(), st.integers(0, 8)))
        items.append(
            MessageItem(
                id=seq if draw(st.booleans()) else f"m{seq}",
                seq=seq,
                role="user",
                content="x",
                tokens=draw(st.integers(1, 9)),
                created_at=None if minute is None else START + timedelta(minutes=minute),
            )
        )
    out: list[tuple[str, list[MessageItem]]] = []
    while items:
        size = draw(st.integers(1, min(3, len(items))))
        group, items = items[:size], items[size:]
        out.append(("add", group))
        if draw(st.integers(0, 4)) == 0:
            out.append(("remove", group[:1]))
    return out


@settings(max_examples=150, deadline=None)
@given(plan=steps())
def test_the_block_priced_by_touched_lines_equals_the_block_priced_from_scratch(plan):
    block = Retrieval(cap=10_000, frame=7, gap_tokens=3)
    for m in {m.id: m for _, group in plan for m in group}.values():
        stamp = f"[{m.created_at:%Y-%m-%d %H:%M}] " if m.created_at else ""
        if stamp:
            block.stamp_tokens[stamp] = 4 + m.seq % 3
    for action, group in plan:
        if action == "remove":
            block.remove({m.id for m in group}, [])
        else:
            lines = [(m, m.tokens or 0) for m in group if m.id not in block.entries]
            predicted = block.used_with(lines)
            block.add(lines)
            assert predicted == block.used == scratch(block)
        assert block.used == scratch(block)
        own = sum(i.tokens for i in block.included())
        assert own + (7 if block.entries else 0) == block.used
