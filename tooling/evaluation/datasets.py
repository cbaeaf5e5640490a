"""Which conversation format an evaluation file holds (LoCoMo's or BEAM's), read into
samples. Pure: nothing here imports Django."""

from __future__ import annotations

import json
from pathlib import Path

from . import beam, locomo

LOCOMO = "locomo"
BEAM = "beam"


def load_samples(path: str | Path) -> tuple[str, list[locomo.Sample]]:
    """The format of the file at ``path`` (``"locomo"`` or ``"beam"``, told from the file
    itself) and its conversations as samples."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if isinstance(data, dict):
        data = [data]
    if beam.is_beam(data):
        return BEAM, [beam.parse_sample(raw) for raw in data]
    return LOCOMO, [locomo.parse_sample(raw) for raw in data]
