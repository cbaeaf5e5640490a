"""Offline recall harness (LoCoMo or BEAM files): the retrieval pipeline and the pure
assembly, no database.

The database's candidate search is emulated in Python (the newest ``--scan-limit`` turns
matching an OR term, the terms common in a long conversation pruned as the PostgreSQL search
prunes them (:func:`chats.retrieval.query.whole_history_terms`, ``--no-prune`` to compare),
best ``--candidates`` by BM25), then the production re-ranking
(:func:`chats.retrieval.rerank.rank_candidates`) and packing run unchanged, so ranking ideas
can be measured in seconds. ``manage.py eval_recall`` runs the real pipeline (FTS index,
ORM); its figures match on the dev set.

    .venv/bin/python tooling/evaluation/locomo_offline.py --dataset FILE.json --budget 4000
        [--set k=v ...]
        [--dump FILE.jsonl]   # per question: evidence found, rank of each evidence turn
        [--scan-limit N --sample-window M [--no-prune]]  # the PostgreSQL scan, scaled
        [--no-dense]          # full-text only (default: with retrieval by meaning when the
                              # embeddings requirements are installed, as eval_recall)

``--set`` overrides a :class:`~chats.retrieval.rerank.RerankConfig` field. A BEAM file is
read with the assistant's turns as replies and scored per ability (standing instructions are
not emulated: their section is the database's); vectors come from the evaluations' cache
(``tooling/evaluation/vector_cache.py``) when ``--vector-cache`` names it.
"""

# ruff: noqa: E402  (the imports below need Django set up)
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import django
import numpy as np

# Started by path, Python puts this directory first, where ``datasets.py`` would shadow the
# package of that name the embeddings' libraries import.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
# The retrieval package loads the models (no database is opened).
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DEBUG", "1")
django.setup()

from chatplatform.core.context import AssemblyInputs, MessageItem, SystemPart, assemble
from chatplatform.core.context.strategies import strategy_for
from chatplatform.core.context.types import DEFAULT_REPLY_EXCERPT_TOKENS
from chatplatform.core.tokens import get_counter
from chats.retrieval import embeddings
from chats.retrieval.query import Term, build_query, whole_history_terms, words_of
from chats.retrieval.rerank import (
    DENSE_TOP_K,
    DENSE_WEIGHT,
    Candidate,
    RerankConfig,
    bm25_scores,
    rank_candidates,
    replies_whole_for,
    to_retrieved,
)
from chats.retrieval.search import PG_SAMPLE_WINDOW, PG_SCAN_LIMIT
from tooling.evaluation import beam, datasets, locomo
from tooling.evaluation.vector_cache import cached_vectors, default_path


def _config(overrides: Sequence[str]) -> RerankConfig:
    config = RerankConfig()
    pairs = dict(kv.split("=", 1) for kv in overrides)
    unknown = [k for k in pairs if not hasattr(config, k)]
    if unknown:
        raise SystemExit(f"unknown RerankConfig field(s): {unknown}")
    return replace(config, **{k: type(getattr(config, k))(v) for k, v in pairs.items()})


def scanned(
    items: Sequence[MessageItem],
    terms: Sequence[Term],
    tokens: dict[int, set[str]],
    *,
    scan_limit: int,
    window: int,
    prune: bool = True,
) -> list[MessageItem]:
    """The turns the PostgreSQL search ranks (``search._postgres_sql``), in seq order: the
    newest ``scan_limit`` matching any term; in a conversation longer than ``scan_limit``
    (with ``prune``), those matching the terms :func:`whole_history_terms` keeps, and every
    match among the newest ``window`` turns."""

    def hit(m: MessageItem, among: Sequence[Term]) -> bool:
        return any(t.matches(w) for t in among for w in tokens[m.seq])

    newest = list(reversed(items))
    whole = list(terms)
    sample: list[MessageItem] = []
    if prune and len(items) > scan_limit:
        sample = newest[:window]
        hits = [sum(1 for m in sample if hit(m, [t])) for t in terms]
        kept = whole_history_terms(
            hits, sampled=len(sample), total=len(items), scan_limit=scan_limit
        )
        if len(kept) < len(terms):
            whole = [t for i, t in enumerate(terms) if i in kept]
        else:
            sample = []
    found = {m.seq: m for m in [m for m in newest if hit(m, whole)][:scan_limit]}
    found.update((m.seq, m) for m in sample if hit(m, terms))
    return [found[n] for n in sorted(found)]


def run(args: argparse.Namespace) -> dict[str, object]:
    counter = get_counter("o200k_base")
    config = _config(args.set)
    policy = locomo.eval_packing_policy(
        args.strategy,
        args.budget,
        recent=args.recent,
        history_reserve=args.reserve,
        reply_excerpt_tokens=args.reply_excerpt_tokens,
    )
    kind, samples = datasets.load_samples(args.dataset)
    groups = beam.ABILITIES if kind == datasets.BEAM else locomo.CATEGORIES
    tallies: dict[int | str, locomo.Tally] = {c: locomo.Tally() for c in groups}
    prompt_tokens: list[int] = []
    needs = strategy_for(args.strategy).needs
    retrieves = needs.retrieval
    dense = args.dense and needs.retrieval_by_meaning and embeddings.available()
    dump = open(args.dump, "w", encoding="utf-8") if args.dump else None  # noqa: SIM115
    for index, sample in enumerate(samples):
        items: list[MessageItem] = []
        text_of: dict[str, str] = {}
        seq_of: dict[str, int] = {}
        for session in sample.sessions:
            for turn in session.turns:
                if not turn.text.strip():
                    continue
                seq = len(items) + 1
                reply = kind == datasets.BEAM and turn.speaker == beam.ASSISTANT
                items.append(
                    MessageItem(
                        seq,
                        seq,
                        "assistant" if reply else "user",
                        turn.text,
                        # the label of a user named after the speaker
                        "Assistant" if reply else f"@{turn.speaker}",
                        counter.count(turn.text),
                        counter.name,
                        session.when,
                    )
                )
                text_of[turn.dia_id] = turn.text
                seq_of[turn.dia_id] = seq
        by_seq = {m.seq: m for m in items}
        if dense:  # stored as the platform stores them (float16), compared the same way
            seqs = np.arange(1, len(items) + 1, dtype=np.int64)
            blobs = [embeddings.to_bytes(v) for v in embeddings.embed([m.content for m in items])]
            vectors = embeddings.from_bytes(blobs)
        tokens = {m.seq: set(words_of(m.content)) for m in items}
        names = {f"@{s}": [s] for s in sample.speakers}
        newest = list(reversed(items))
        system = SystemPart(
            locomo.EVAL_SYSTEM_PROMPT.replace("{botname}", "Assistant").replace(
                "{chatname}", f"LoCoMo {sample.sample_id or index}"
            )
        )

        def fetch(seqs: set[int], by_seq: dict[int, MessageItem] = by_seq) -> list[Candidate]:
            return [
                Candidate(by_seq[n].id, n, by_seq[n].content, by_seq[n].author, by_seq[n].role)
                for n in sorted(seqs)
                if n in by_seq
            ]

        for q in sample.questions:
            if q.category not in tallies:
                continue
            evidence = [text_of[e] for e in q.evidence if e in text_of]
            if not evidence:
                continue
            new = MessageItem(
                "q",
                len(items) + 1,
                "user",
                q.question,
                "User",
                created_at=sample.sessions[-1].when + timedelta(days=1),
            )
            retrieved = []
            order: list[int] = []
            if retrieves:
                query = build_query(q.question)
                plain = [t for t in query.terms if not t.bigram]
                matching = scanned(
                    items,
                    plain,
                    tokens,
                    scan_limit=args.scan_limit,
                    window=args.sample_window,
                    prune=args.prune,
                )
                if len(matching) > args.candidates:  # the database's own top by BM25
                    db = bm25_scores(
                        query.terms,
                        [m.content for m in matching],
                        total_docs=len(items),
                        k1=1.2,
                        b=0.75,
                    )
                    best = sorted(
                        zip(matching, db, strict=True), key=lambda p: (-p[1][0], -p[0].seq)
                    )
                    matching = [m for m, _ in best[: args.candidates]]
                near: dict[int, float] = {}
                if dense:
                    question = embeddings.embed([q.question])[0]
                    near = embeddings.top_by_cosine(seqs, vectors, question, args.dense_top_k)
                    have = {m.seq for m in matching}
                    matching += [by_seq[n] for n in sorted(near) if n not in have]
                cands = [Candidate(m.id, m.seq, m.content, m.author, m.role) for m in matching]
                ranked_items = rank_candidates(
                    query,
                    cands,
                    total_docs=len(items),
                    names=names,
                    config=config,
                    neighbor_hits=args.neighbor_hits,
                    fetch=fetch,
                    dense=near,
                    dense_weight=args.dense_weight,
                )
                order = [s.candidate.seq for s in ranked_items]
                retrieved = to_retrieved(
                    ranked_items,
                    by_seq,
                    neighbors=config.neighbor_depth,
                    max_items=policy.retrieval_max_items,
                    replies_whole=replies_whole_for(query, config),
                )
            out = assemble(
                policy,
                AssemblyInputs(
                    new_message=new,
                    system=system,
                    retrieved=retrieved,
                    recent=newest[:500],
                    multi_user=len(sample.speakers) > 1,
                ),
                counter,
            )
            text = locomo.prompt_text(out.system, out.messages)
            found = locomo.evidence_present(text, evidence, q.quote)
            present = dict(zip((e for e in q.evidence if e in text_of), found, strict=True))
            tallies[q.category].add(found, latest=q.latest_found(present))
            prompt_tokens.append(out.prompt_tokens)
            if dump is not None:
                ev = [e for e in q.evidence if e in text_of]
                line = {
                    "sample_id": sample.sample_id,
                    "category": q.category,
                    "question": q.question,
                    "evidence": ev,
                    "found": found,
                    "rank": [order.index(seq_of[e]) if seq_of[e] in order else None for e in ev],
                    "seq": [seq_of[e] for e in ev],
                    "texts": evidence,
                    "terms": [t.text for t in build_query(q.question).terms],
                    "context": text if args.context else "",
                }
                dump.write(json.dumps(line, ensure_ascii=False) + "\n")
    if dump is not None:
        dump.close()
    core = [
        tallies[a].as_dict()["all_evidence_percent"]
        for a in beam.CORE_ABILITIES
        if kind == datasets.BEAM
    ]
    return {
        **({"core_percent": round(sum(core) / len(core), 2)} if core else {}),
        "strategy": args.strategy,
        "budget": args.budget,
        "categories": {str(c): t.as_dict() for c, t in tallies.items() if t.questions},
        "mean_prompt_tokens": round(sum(prompt_tokens) / max(1, len(prompt_tokens)), 1),
        "dense_retrieval": "on" if dense else "off",
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="/work/shared/datasets/locomo/locomo-dev.json")
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--strategy", default="hybrid")
    parser.add_argument("--recent", type=int, default=4)
    parser.add_argument("--candidates", type=int, default=300)
    parser.add_argument("--neighbor-hits", type=int, default=40)
    # The PostgreSQL search's bounds (chats.retrieval.search); smaller ones emulate a
    # conversation far longer than the dataset's.
    parser.add_argument("--scan-limit", type=int, default=PG_SCAN_LIMIT)
    parser.add_argument("--sample-window", type=int, default=PG_SAMPLE_WINDOW)
    parser.add_argument("--no-prune", dest="prune", action="store_false")
    parser.add_argument("--reserve", type=int, default=400)
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--reply-excerpt-tokens", type=int, default=DEFAULT_REPLY_EXCERPT_TOKENS)
    parser.add_argument("--no-dense", dest="dense", action="store_false")
    parser.add_argument("--dense-top-k", type=int, default=DENSE_TOP_K)
    parser.add_argument("--dense-weight", type=float, default=DENSE_WEIGHT)
    parser.add_argument("--dump", help="JSON lines: per question evidence found and ranks")
    parser.add_argument("--context", action="store_true", help="--dump: include the prompt")
    parser.add_argument("--vector-cache", type=Path, default=default_path())
    parser.add_argument("--no-vector-cache", dest="vector_cache", action="store_const", const=None)
    args = parser.parse_args()
    with cached_vectors(args.vector_cache):
        result = run(args)
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
