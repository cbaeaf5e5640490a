"""Where the evidence of the missed questions went, read from an ``eval_recall --dump``.

For each question whose evidence is not all in its prompt, every evidence message is shown
as ``whole`` (its text is in the prompt), ``head`` (only its first characters are: a reply
found through its exchange is shown so) or ``absent``, with its place in the conversation,
its author and its length; the last line tallies the evidence of every question read by
author and state. Whether a missed message was ranked too low, or never a candidate, is the
offline harness's ``--dump`` (``rank``); this reads the product's own prompts.

    .venv/bin/python tooling/evaluation/misses.py DATASET.json DUMP.jsonl \\
        [--categories information_extraction,multi_session_reasoning] [--tally-only]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tooling.evaluation import datasets
from tooling.evaluation.locomo import Question, Turn, evidence_present, normalise

#: Characters of a message that stand for it shown as its head.
HEAD_CHARS = 120


def states(context: str, question: Question, turns: dict[str, Turn]) -> list[str]:
    """``whole``, ``head`` or ``absent`` for each of the question's evidence messages."""
    texts = [turns[e].text if e in turns else "" for e in question.evidence]
    whole = evidence_present(context, texts, question.quote)
    haystack = normalise(context)

    def state(text: str, found: bool) -> str:
        if text and found:
            return "whole"
        if text and normalise(text[:HEAD_CHARS]) in haystack:
            return "head"
        return "absent"

    return [state(text, found) for text, found in zip(texts, whole, strict=True)]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("dump")
    parser.add_argument("--categories", default="", help="comma-separated; all when empty")
    parser.add_argument("--tally-only", action="store_true")
    args = parser.parse_args(argv)
    wanted = {c for c in args.categories.split(",") if c}
    _, samples = datasets.load_samples(args.dataset)
    by_question = {}
    for sample in samples:
        ordered = sample.turns()
        turns = {t.dia_id: t for t in ordered}
        place = {t.dia_id: i for i, t in enumerate(ordered)}
        for q in sample.questions:
            by_question[(sample.sample_id, q.question)] = (q, turns, place, len(ordered))
    tally: Counter[tuple[str, str]] = Counter()
    with open(args.dump, encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            question, turns, place, size = by_question[(row["sample_id"], row["question"])]
            if wanted and str(question.category) not in wanted:
                continue
            found = states(row["context"], question, turns)
            evidence = [
                (dia_id, turns.get(dia_id), state)
                for dia_id, state in zip(question.evidence, found, strict=True)
            ]
            for _, turn, state in evidence:
                tally[(turn.speaker if turn else "?", state)] += 1
            if args.tally_only or all(s == "whole" for s in found):
                continue
            print(f"## {row['sample_id']} [{question.category}] {question.question}")
            for dia_id, turn, state in evidence:
                text = turn.text if turn else ""
                print(
                    f"   {state:6} {dia_id} at {place.get(dia_id)}/{size} "
                    f"{turn.speaker if turn else '?'} {len(text)} chars: {text[:100]!r}"
                )
    print(json.dumps({f"{who} {state}": n for (who, state), n in sorted(tally.items())}))


if __name__ == "__main__":
    main()
