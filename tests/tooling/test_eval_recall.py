"""``manage.py eval_recall`` on a tiny synthetic LoCoMo-format file."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from chatplatform.models import Tenant
from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import all_tenants
from chats.retrieval import embeddings
from tooling.evaluation import locomo

pytestmark = pytest.mark.django_db

FILLER = "Filler chat number {i}: nothing much happened, just saying hello again to you."


def dataset(tmp_path):
    session_2 = [
        {
            "speaker": "Bob" if i % 2 else "Alice",
            "dia_id": f"D2:{i + 1}",
            "text": FILLER.format(i=i),
        }
        for i in range(60)
    ]
    sample = {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Alice",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {
                    "speaker": "Alice",
                    "dia_id": "D1:1",
                    "text": "I adopted a parrot named Kiwi yesterday!",
                    "blip_caption": "a green parrot on a perch",
                },
                {"speaker": "Bob", "dia_id": "D1:2", "text": "Congrats! Such smart birds."},
                {"speaker": "Alice", "dia_id": "D1:3", "text": "My sister Zoe lives in Oslo."},
            ],
            "session_2_date_time": "10:00 am on 1 June, 2023",
            "session_2": session_2,
        },
        "qa": [
            {
                "question": "What is the name of Alice's parrot?",
                "evidence": ["D1:1"],
                "category": 4,
                "answer": "Kiwi",
            },
            {
                "question": "Where does Alice's sister live?",
                "evidence": ["D1:3; D2:60"],
                "category": 1,
                "answer": "Oslo",
            },
            {
                "question": "When did Alice adopt the parrot?",
                "evidence": ["D:1:1"],
                "category": 2,
                "answer": "7 May 2023",
            },
            {
                "question": "What is Alice's dog called?",
                "evidence": [],
                "category": 5,
                "adversarial_answer": "Rex",
            },
            {"question": "Unanswerable?", "evidence": ["D9:9"], "category": 3, "answer": "-"},
        ],
        "observation": {"session_1_observation": "NOT TO BE USED"},
        "session_summary": {"session_1_summary": "NOT TO BE USED"},
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([sample]))
    return path, sample


def run(path, strategy, budget=1000, dump=None, extra=()):
    out = io.StringIO()
    args = ["--dataset", str(path), "--budget", str(budget), "--strategy", strategy, "--json"]
    if dump:
        args += ["--dump", str(dump)]
    args += list(extra)
    call_command("eval_recall", *args, stdout=out)
    return json.loads(out.getvalue())


def recompute(dump_path, sample):
    """Recall recomputed from the dumped prompts, independently of the command."""
    texts = {}
    conv = sample["conversation"]
    for key, turns in conv.items():
        if key.startswith("session_") and isinstance(turns, list):
            for t in turns:
                texts[t["dia_id"]] = locomo.turn_text(t)
    tallies = {c: locomo.Tally() for c in (1, 2, 3, 4)}
    evidence = {q["question"]: locomo.normalise_evidence(q["evidence"]) for q in sample["qa"]}
    for line in dump_path.read_text().splitlines():
        row = json.loads(line)
        assert set(row) == {"sample_id", "question", "category", "context"}
        ids = [e for e in evidence[row["question"]] if e in texts]
        tallies[row["category"]].add(
            locomo.evidence_present(row["context"], [texts[e] for e in ids])
        )
    return {str(c): t.as_dict() for c, t in tallies.items()}


def test_hybrid_finds_old_evidence_and_reports_every_field(tmp_path):
    path, sample = dataset(tmp_path)
    dump = tmp_path / "dump.jsonl"
    result = run(path, "hybrid", dump=dump)
    assert set(result) == {
        "strategy",
        "budget",
        "warm",
        "turn_retrieval_percent",
        "questions",
        "categories",
        "mean_prompt_tokens",
        "mean_history_tokens",
        "dense_retrieval",
        "embedding_model",
        "embedding_ms",
        "summaries",
        "summaries_written",
        "summary_ms",
    }
    assert result["summaries"] is False and result["summaries_written"] == 0
    assert result["strategy"] == "hybrid" and result["budget"] == 1000
    # Hybrid retrieves by meaning too where the embeddings are installed (dev requirements).
    assert result["dense_retrieval"] == ("on" if embeddings.available() else "unavailable")
    assert result["questions"] == 3  # category 5 and unresolvable evidence are left out
    cats = result["categories"]
    assert set(cats) == {"1", "2", "3", "4"}
    assert cats["4"] == {
        "questions": 1,
        "all_evidence_percent": 100.0,
        "any_evidence_percent": 100.0,
    }
    assert cats["1"]["all_evidence_percent"] == 100.0  # D1:3 retrieved, D2:60 recent
    assert cats["2"]["all_evidence_percent"] == 100.0
    assert cats["3"]["questions"] == 0
    assert 0 < result["mean_prompt_tokens"] <= 1000
    assert result["mean_history_tokens"] > 1000  # the whole history would not fit
    assert recompute(dump, sample) == cats
    context = json.loads(dump.read_text().splitlines()[0])["context"]
    assert "[shares a photo: a green parrot on a perch]" in context
    assert "NOT TO BE USED" not in context


def test_hybrid_without_dense_is_full_text_only(tmp_path):
    path, _ = dataset(tmp_path)
    result = run(path, "hybrid", extra=["--no-dense"])
    assert result["dense_retrieval"] == "off" and result["embedding_ms"] == 0
    assert result["categories"]["4"]["all_evidence_percent"] == 100.0


def test_a_warm_question_finds_old_evidence_only_within_the_turn_share(tmp_path):
    # Asked while the window a turn a minute earlier started is cached: the question's own
    # finds are the per-turn ones, so with no share the old evidence stays out.
    path, _ = dataset(tmp_path)
    args = ["--warm", "--no-dense", "--turn-retrieval-percent"]
    none = run(path, "hybrid", extra=[*args, "0"])
    assert none["warm"] is True and none["turn_retrieval_percent"] == 0
    assert none["categories"]["4"]["all_evidence_percent"] == 0.0
    some = run(path, "hybrid", extra=[*args, "50"])
    assert some["categories"]["4"]["all_evidence_percent"] == 100.0
    cold = run(path, "hybrid", extra=["--no-dense"])
    assert cold["warm"] is False


def test_sliding_window_misses_old_evidence_any_vs_all(tmp_path):
    path, sample = dataset(tmp_path)
    dump = tmp_path / "dump.jsonl"
    result = run(path, "sliding_window", dump=dump)
    cats = result["categories"]
    assert cats["4"]["all_evidence_percent"] == 0.0
    assert cats["1"] == {"questions": 1, "all_evidence_percent": 0.0, "any_evidence_percent": 100.0}
    assert recompute(dump, sample) == cats


def test_scratch_data_and_questions_are_rolled_back(tmp_path):
    path, _ = dataset(tmp_path)
    with all_tenants():
        before = Message.objects.count()
    run(path, "rolling_summary")
    with all_tenants():
        assert Message.objects.count() == before
        assert not Message.objects.filter(content__contains="parrot").exists()
    assert not Tenant.objects.filter(slug__startswith="locomo-eval").exists()


def test_bad_input_is_a_command_error(tmp_path):
    missing = tmp_path / "missing.json"
    with pytest.raises(CommandError):
        call_command("eval_recall", "--dataset", str(missing), "--json")
    bad = tmp_path / "bad.json"
    bad.write_text('[{"conversation": {}}]')
    with pytest.raises(CommandError):
        call_command("eval_recall", "--dataset", str(bad), "--json")
