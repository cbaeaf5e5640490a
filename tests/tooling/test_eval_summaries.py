"""``eval_recall --summaries`` on a small synthetic BEAM-format file: the rolling summaries
are written through the background job's service before the questions, and a question about
the whole conversation counts as covered when each of its evidence messages is in the prompt
verbatim or inside the range of a summary the prompt shows (``span_covered_percent``)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from summaries.models import Summary
from tooling.evaluation import locomo
from tooling.evaluation.recall import EvalOptions, run_eval

pytestmark = pytest.mark.django_db

DAYS = ["March-1-2024", "March-8-2024", "March-15-2024", "March-22-2024", "March-29-2024"]
TOPICS = ["the kiln", "glaze recipes", "the studio lease", "clay suppliers", "the autumn show"]
#: Spread over the conversation: the first message, two in the middle, one of the newest.
SPREAD = [0, 70, 150, 197]


def batch(day: int) -> dict:
    turns = []
    for i in range(20):
        n = 40 * day + 2 * i
        turns.append(
            [
                {
                    "role": "user",
                    "id": n,
                    "content": f"Week {day + 1}, note {i}: more about {TOPICS[day]}, the "
                    f"{i}th detail worth keeping, with numbers {n * 7} and {n * 13}.",
                    **({"time_anchor": DAYS[day]} if i == 0 else {}),
                },
                {
                    "role": "assistant",
                    "id": n + 1,
                    "content": f"Got it: {TOPICS[day]} detail {i} recorded as item {n + 1}.",
                },
            ]
        )
    return {"batch_number": day + 1, "turns": turns}


def write(tmp_path) -> str:
    sample = {
        "sample_id": "beam-summaries-1",
        "chat": [batch(day) for day in range(5)],
        "probing_questions": {
            "summarization": [
                {"question": "Can you sum up everything so far?", "source_chat_ids": SPREAD}
            ],
            "information_extraction": [
                {"question": "Which numbers came with note 3 of week 1?", "source_chat_ids": [6]}
            ],
        },
    }
    path = tmp_path / "beam-summaries.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return str(path)


def test_summaries_cover_the_whole_span_within_the_budget(tmp_path):
    plain = run_eval(
        write(tmp_path),
        EvalOptions(strategy="hybrid", budget=4800, dense=False, instructions=False),
    )
    summarised = run_eval(
        write(tmp_path),
        EvalOptions(
            strategy="hybrid", budget=4800, dense=False, instructions=False, summaries=True
        ),
    )

    without = plain["abilities"]["summarization"]
    assert without["all_evidence_percent"] == 0.0  # 200 messages do not fit 4,800 tokens
    # No summaries shown: covered means verbatim.
    for ability in plain["abilities"].values():
        assert ability["span_covered_percent"] == ability["all_evidence_percent"]
    assert plain["summaries_written"] == 0

    covered = summarised["abilities"]["summarization"]
    assert covered["all_evidence_percent"] == 0.0
    assert covered["span_covered_percent"] == 100.0
    assert summarised["summaries_written"] > 5
    assert summarised["mean_prompt_tokens"] <= 4800
    assert not Summary.objects.exists()  # rolled back with the rest


def test_the_newest_evidence_counts_only_verbatim(tmp_path, monkeypatch):
    """Messages after the summarised part are covered only when the prompt holds them."""
    seen: list[list[bool]] = []
    real = locomo.span_covered

    def spy(found, seqs, ranges):
        spans = list(ranges)
        covered = real(found, seqs, spans)
        if len(seqs) == len(SPREAD):  # the summarisation question
            seen.append(covered)
            assert max(b for _, b in spans) == 200 - 4  # up to the raw history
            assert found[-1] and seqs[-1] == 198  # id 197, kept raw and sent verbatim
            assert not any(a <= seqs[-1] <= b for a, b in spans)  # no summary has it
        return covered

    monkeypatch.setattr(locomo, "span_covered", spy)
    run_eval(
        write(tmp_path),
        EvalOptions(
            strategy="hybrid", budget=4800, dense=False, instructions=False, summaries=True
        ),
    )
    assert seen == [[True] * len(SPREAD)]


def test_span_covered():
    found = [True, False, False, False]
    assert locomo.span_covered(found, [5, 12, 30, None], [(10, 20), (21, 29)]) == [
        True,
        True,
        False,
        False,
    ]
    assert locomo.span_covered([False], [30], []) == [False]


def test_the_command_takes_summaries(tmp_path):
    out = io.StringIO()
    call_command(
        "eval_recall",
        "--dataset",
        write(tmp_path),
        "--budget",
        "4800",
        "--strategy",
        "hybrid",
        "--no-dense",
        "--no-vector-cache",
        "--summaries",
        "--json",
        stdout=out,
    )
    result = json.loads(out.getvalue())
    assert result["summaries"] is True
    assert result["abilities"]["summarization"]["span_covered_percent"] == 100.0


def test_the_policy_gives_summaries_a_share_taken_from_retrieval():
    plain = locomo.eval_policy_fields("hybrid", 32000)
    shared = locomo.eval_policy_fields("hybrid", 32000, summaries=True)
    assert plain["summaries_budget"] == 0
    assert shared["summaries_budget"] == 32000 // locomo.SUMMARIES_SHARE
    assert shared["retrieval_budget"] == plain["retrieval_budget"] - shared["summaries_budget"]
    assert shared["raw_history_limit"] == shared["min_recent_messages"]
    assert shared["summary_max_tokens"] == 512
    small = locomo.eval_policy_fields("hybrid", 4800, summaries=True)
    assert small["summary_max_tokens"] < 512
    assert 3 * (small["summary_max_tokens"] + locomo.SUMMARY_FRAME_SLACK) <= 4800 // 16
