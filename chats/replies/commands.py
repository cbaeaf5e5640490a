"""Chat commands answered without the model (seed 004)."""

from __future__ import annotations

from typing import Any

PAGE_SIZE = 10


def memories_command(tenant_id: int, user: Any, text: str) -> str:
    """``/memories [page]``: the user's facts, paginated."""
    parts = text.strip().split()
    try:
        page = max(1, int(parts[1])) if len(parts) > 1 else 1
    except ValueError:
        page = 1
    try:
        from memory.selectors import facts_page
    except ImportError:
        return "Memories are not available."
    facts, total = facts_page(tenant_id=tenant_id, user_id=user.pk, page=page, page_size=PAGE_SIZE)
    if total == 0:
        return "No memories saved yet."
    pages = (total + PAGE_SIZE - 1) // PAGE_SIZE
    lines = [f"Your memories (page {min(page, pages)} of {pages}, {total} in all):"]
    first = (page - 1) * PAGE_SIZE
    for number, fact in enumerate(facts, start=first + 1):
        key = f"[{fact.key}] " if fact.key else ""
        lines.append(f"{number}. {key}{fact.text}")
    return "\n".join(lines)
