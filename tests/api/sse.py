"""Reading server-sent events in tests."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def parse_events(chunks: Iterable[bytes]) -> list[tuple[str, dict[str, Any]]]:
    """``(event name, data)`` of every event in the stream (comment lines skipped)."""
    text = b"".join(chunks).decode()
    events = []
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line and not line.startswith(":")]
        if not lines:
            continue
        fields = dict(line.split(": ", 1) for line in lines)
        events.append((fields["event"], json.loads(fields["data"])))
    return events
