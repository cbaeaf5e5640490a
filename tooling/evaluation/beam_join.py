"""Longer BEAM-format conversations made by joining shorter ones end to end.

The BEAM development file holds conversations of about 130,000 and 500,000 tokens; the
conversations the platform must also serve run to 1,000,000. Joining conversations of one
file end to end gives conversations that long with every question still scored: the later
parts' message ids are renumbered after the earlier parts', their questions' references
with them, and their dates moved to start a week after the earlier part's last date, so the
sessions stay in order and a date a question names keeps its distance to the others.

    .venv/bin/python tooling/evaluation/beam_join.py OUT.json \\
        beam-500K-1+beam-500K-2 beam-500K-3+beam-500K-4 \\
        beam-500K-5+beam-100K-1+beam-100K-2+beam-100K-3+beam-100K-4
        [--dataset ../shared/datasets/beam/beam-dev.json]

Each argument after OUT.json is one joined conversation: the sample ids of its parts, in
order, joined by ``+``. The result is read by ``eval_recall`` and ``bench_cost`` as any BEAM
file (each joined conversation is one user's, so the later parts' standing instructions add
to the earlier parts').
"""

from __future__ import annotations

import argparse
import copy
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

#: A date as BEAM writes it (``"March-15-2024"``).
_ANCHOR = re.compile(r"([A-Za-z]+)[-\s]+(\d{1,2})[-\s,]+(\d{4})")
_CHAT_ID = re.compile(r"(chat_id\s*:\s*)(\d+)", re.IGNORECASE)
#: The later part starts this long after the earlier part's last date.
GAP = timedelta(days=7)
DEFAULT_DATASET = Path(__file__).resolve().parents[3] / "shared/datasets/beam/beam-dev.json"


def _date(value: Any) -> datetime | None:
    match = _ANCHOR.search(str(value or ""))
    if not match:
        return None
    month, day, year = match.groups()
    try:
        return datetime.strptime(f"{month[:3]} {day} {year}", "%b %d %Y")
    except ValueError:
        return None


def _messages(conversation: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for batch in conversation["chat"]:
        for turn in batch["turns"]:
            yield from turn


def _dates(conversation: Mapping[str, Any]) -> list[datetime]:
    values = [b.get("time_anchor") for b in conversation["chat"]]
    values += [m.get("time_anchor") for m in _messages(conversation)]
    return [d for d in map(_date, values) if d is not None]


def _moved(value: Any, days: int) -> Any:
    when = _date(value)
    return (when + timedelta(days=days)).strftime("%B-%d-%Y") if when else value


def _renumbered(value: Any, offset: int) -> Any:
    if isinstance(value, int):
        return value + offset
    if isinstance(value, str) and value.strip().isdigit():
        return str(int(value) + offset)
    if isinstance(value, list):
        return [_renumbered(v, offset) for v in value]
    return value


def _question(question: Mapping[str, Any], offset: int) -> dict[str, Any]:
    out = copy.deepcopy(dict(question))
    source = out.get("source_chat_ids")
    if isinstance(source, Mapping):
        out["source_chat_ids"] = {k: _renumbered(v, offset) for k, v in source.items()}
    elif isinstance(source, list):
        out["source_chat_ids"] = _renumbered(source, offset)
    references = out.get("conversation_references")
    if isinstance(references, str):
        references = [references]
    if references:
        out["conversation_references"] = [
            _CHAT_ID.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + offset}", str(r))
            for r in references
        ]
    return out


def join(parts: Sequence[Mapping[str, Any]], sample_id: str) -> dict[str, Any]:
    """One conversation of ``parts`` in order (see the module's description)."""
    out: dict[str, Any] = {"sample_id": sample_id, "size": "joined", "chat": []}
    questions: dict[str, list[dict[str, Any]]] = {}
    offset, last, number = 0, None, 0
    for part in parts:
        dates = _dates(part)
        days = (last - min(dates) + GAP).days if last and dates else 0
        for raw in part["chat"]:
            batch = copy.deepcopy(raw)
            number += 1
            batch["batch_number"] = number
            if batch.get("time_anchor"):
                batch["time_anchor"] = _moved(batch["time_anchor"], days)
            for turn in batch["turns"]:
                for message in turn:
                    message["id"] = int(message["id"]) + offset
                    if message.get("time_anchor"):
                        message["time_anchor"] = _moved(message["time_anchor"], days)
            out["chat"].append(batch)
        for ability, asked in (part.get("probing_questions") or {}).items():
            questions.setdefault(ability, []).extend(_question(q, offset) for q in asked)
        offset += max((int(m["id"]) for m in _messages(part)), default=-1) + 1
        if dates:
            last = max(dates) + timedelta(days=days)
    out["probing_questions"] = questions
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("joins", nargs="+", help="sample ids joined by +, one per result")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    args = parser.parse_args(argv)
    by_id = {c["sample_id"]: c for c in json.loads(args.dataset.read_text())}
    joined = [
        join([by_id[name] for name in spec.split("+")], f"joined-{n}")
        for n, spec in enumerate(args.joins, start=1)
    ]
    args.out.write_text(json.dumps(joined))
    for conversation in joined:
        texts = [m["content"] for m in _messages(conversation)]
        asked = sum(len(v) for v in conversation["probing_questions"].values())
        print(
            f"{conversation['sample_id']}: {len(texts)} messages, "
            f"{sum(map(len, texts))} characters, {asked} questions"
        )


if __name__ == "__main__":
    main()
