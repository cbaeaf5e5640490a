"""Offline LoCoMo recall harness: the retrieval pipeline and the pure assembly, no database.

The database's candidate search is emulated in Python (every turn matching an OR term,
ranked by BM25, at most ``--candidates``), so ranking ideas can be measured in seconds.
``manage.py eval_recall`` runs the real pipeline (FTS index, ORM); its figures should match.

    .venv/bin/python bench/locomo_offline.py --dataset FILE.json --budget 4000 [--set k=v ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chatplatform.tokens import get_counter
from chats.context import AssemblyInputs, MessageItem, SystemPart, assemble
from chats.retrieval import locomo
from chats.retrieval.query import build_query
from chats.retrieval.rerank import (
    Candidate,
    RerankConfig,
    bm25_scores,
    neighbor_seqs,
    propagate,
    ranked,
    score,
    to_retrieved,
)


def run(args: argparse.Namespace) -> dict[str, object]:
    counter = get_counter("o200k_base")
    overrides = dict(kv.split("=", 1) for kv in args.set)
    config = RerankConfig()
    config = replace(
        config,
        **{k: type(getattr(config, k))(v) for k, v in overrides.items() if hasattr(config, k)},
    )
    policy = locomo.eval_packing_policy(
        args.strategy, args.budget, recent=args.recent, history_reserve=args.reserve
    )
    tallies = {c: locomo.Tally() for c in locomo.CATEGORIES}
    prompt_tokens: list[int] = []
    for sample in locomo.load_samples(args.dataset):
        items: list[MessageItem] = []
        text_of: dict[str, str] = {}
        for session in sample.sessions:
            for turn in session.turns:
                seq = len(items) + 1
                items.append(
                    MessageItem(
                        seq,
                        seq,
                        "user",
                        turn.text,
                        turn.speaker,
                        counter.count(turn.text),
                        counter.name,
                        session.when,
                    )
                )
                text_of[turn.dia_id] = turn.text
        by_seq = {m.seq: m for m in items}
        names = {s: [s] for s in sample.speakers}
        newest = list(reversed(items))
        system = SystemPart(
            f"You are Assistant. Answer the question about the conversation "
            f"between {' and '.join(sample.speakers)} from the older messages "
            "and the recent history below."
        )
        for q in sample.questions:
            if q.category not in locomo.CATEGORIES:
                continue
            evidence = [text_of[e] for e in q.evidence if e in text_of]
            if not evidence:
                continue
            new = MessageItem(
                "q",
                len(items) + 1,
                "user",
                q.question,
                "Question",
                created_at=sample.sessions[-1].when + timedelta(days=1),
            )
            retrieved = []
            if args.strategy == "hybrid":
                query = build_query(q.question)
                matching = [
                    m
                    for m in items
                    if bm25_scores(query.terms, [m.content], total_docs=1, k1=1.2, b=0.4)[0][1]
                ]
                cands = [Candidate(m.id, m.seq, m.content, m.author) for m in matching]
                scored = score(query, cands, total_docs=len(items), names=names, config=config)
                near = neighbor_seqs(scored, hits=args.neighbor_hits, depth=config.neighbor_depth)
                propagate(
                    scored,
                    [
                        Candidate(by_seq[n].id, n, by_seq[n].content, by_seq[n].author)
                        for n in near
                        if n in by_seq
                    ],
                    config,
                )
                ranked_items = ranked(scored)[: args.candidates]
                retrieved = to_retrieved(ranked_items, by_seq, neighbors=config.neighbor_depth)
            out = assemble(
                policy,
                AssemblyInputs(
                    new_message=new,
                    system=system,
                    retrieved=retrieved,
                    recent=newest[:200],
                    multi_user=True,
                ),
                counter,
            )
            text = locomo.prompt_text(out.system, out.messages)
            found = locomo.evidence_present(text, evidence)
            tallies[q.category].add(found)
            prompt_tokens.append(out.prompt_tokens)
    return {
        "strategy": args.strategy,
        "budget": args.budget,
        "categories": {str(c): t.as_dict() for c, t in tallies.items()},
        "mean_prompt_tokens": round(sum(prompt_tokens) / max(1, len(prompt_tokens)), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="/work/shared/datasets/locomo/locomo-dev.json")
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--strategy", default="hybrid")
    parser.add_argument("--recent", type=int, default=6)
    parser.add_argument("--candidates", type=int, default=300)
    parser.add_argument("--neighbor-hits", type=int, default=60)
    parser.add_argument("--reserve", type=int, default=400)
    parser.add_argument("--set", action="append", default=[])
    result = run(parser.parse_args())
    cats = result["categories"]
    assert isinstance(cats, dict)
    line = " ".join(
        f"{c}:{v['all_evidence_percent']:.1f}/{v['any_evidence_percent']:.1f}"
        for c, v in cats.items()
    )
    print(line, result["mean_prompt_tokens"])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
