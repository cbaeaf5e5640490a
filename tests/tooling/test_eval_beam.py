"""``eval_recall`` and ``bench_cost`` on a tiny synthetic BEAM-format file: the format is
told from the file, the roles are kept, and the results come per ability."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from chatplatform.models.conversations import Message, MessageRole
from chatplatform.tenancy.scoping import all_tenants
from tooling.evaluation import beam, datasets, recall
from tooling.evaluation.recall import EvalOptions, run_eval

pytestmark = pytest.mark.django_db

INSTRUCTION = "Always answer me in bullet points, never in long paragraphs."
FILLER = "Let us keep going with step {i} of the build, nothing new to remember here at all."


def conversation() -> dict:
    first = [
        [
            {
                "role": "user",
                "id": 0,
                "time_anchor": "March-15-2024",
                "content": f"Hi! {INSTRUCTION} ->-> 1,1",
            },
            {"role": "assistant", "id": 1, "content": "Understood: bullet points from now on."},
        ],
        [
            {"role": "user", "id": 2, "content": "My API answers in 400 ms today. ->-> 1,2"},
            {"role": "assistant", "id": 3, "content": "Noted, 400 ms."},
        ],
    ]
    later = [
        [
            {"role": "user", "id": 4 + 2 * i, "content": FILLER.format(i=i) + " ->-> 2,1"},
            {"role": "assistant", "id": 5 + 2 * i, "content": f"Step {i} done. " * 8},
        ]
        for i in range(40)
    ]
    return {
        "sample_id": "beam-tiny-1",
        "size": "tiny",
        "chat": [
            {"batch_number": 1, "turns": first, "time_anchor": None},
            {"batch_number": 2, "turns": later},
        ],
        "probing_questions": {
            "instruction_following": [
                {
                    "question": "How should I structure the release notes?",
                    "instruction_being_tested": INSTRUCTION,
                    "source_chat_ids": [0],
                }
            ],
            "information_extraction": [
                {"question": "How fast was my API?", "source_chat_ids": {"first": [2]}}
            ],
            "temporal_reasoning": [
                {"question": "When did I start?", "conversation_references": ["chat_id: 0"]}
            ],
            "abstention": [{"question": "What is my dog's name?", "rubric": ["no such info"]}],
        },
    }


def write(tmp_path) -> str:
    path = tmp_path / "beam.json"
    path.write_text(json.dumps([conversation()]), encoding="utf-8")
    return str(path)


def test_the_format_is_told_from_the_file_and_batches_become_dated_sessions(tmp_path):
    kind, (sample,) = datasets.load_samples(write(tmp_path))
    assert kind == datasets.BEAM
    assert [s.when.date().isoformat() for s in sample.sessions] == ["2024-03-15", "2024-03-15"]
    assert sample.sessions[1].when > sample.sessions[0].when  # an undated batch follows
    assert sample.speakers == ("user",)
    assert [t.speaker for t in sample.sessions[0].turns] == ["user", "assistant"] * 2
    assert sample.sessions[0].turns[0].text.endswith("->-> 1,1")  # kept as it is
    by_ability = {q.category: q for q in sample.questions}
    assert by_ability["information_extraction"].evidence == ("2",)
    assert by_ability["temporal_reasoning"].evidence == ("0",)
    assert by_ability["instruction_following"].quote == INSTRUCTION
    assert by_ability["abstention"].evidence == ()


def test_recall_is_reported_per_ability_with_the_core_mean(tmp_path):
    window = run_eval(
        write(tmp_path), EvalOptions(strategy="sliding_window", budget=1200, instructions=False)
    )
    assert window["dataset"] == "beam"
    assert set(window["abilities"]) == {
        "instruction_following",
        "information_extraction",
        "temporal_reasoning",
    }
    assert window["questions"] == 3  # abstention has no evidence: not scored
    # The early instruction and value are far behind a 1,200-token window.
    assert window["abilities"]["instruction_following"]["all_evidence_percent"] == 0.0
    assert window["core_percent"] == 0.0
    with all_tenants():
        assert not Message.objects.filter(content__contains="->->").exists()  # rolled back

    hybrid = run_eval(write(tmp_path), EvalOptions(strategy="hybrid", budget=1200, dense=False))
    found = hybrid["abilities"]["information_extraction"]["all_evidence_percent"]
    assert found == 100.0  # retrieval brings "400 ms" back
    assert hybrid["core_percent"] == pytest.approx(
        sum(a["all_evidence_percent"] for a in hybrid["abilities"].values()) / 3, abs=0.01
    )


def test_assistant_messages_are_stored_as_replies(tmp_path, monkeypatch):
    stored: list[tuple[str, bool]] = []
    real = recall.message_create

    def spy(**kwargs):
        message, created = real(**kwargs)
        stored.append((message.role, message.author_id is None))
        return message, created

    monkeypatch.setattr(recall, "message_create", spy)
    run_eval(write(tmp_path), EvalOptions(strategy="sliding_window", budget=1200))
    assert stored[:4] == [
        (MessageRole.USER, False),
        (MessageRole.ASSISTANT, True),
        (MessageRole.USER, False),
        (MessageRole.ASSISTANT, True),
    ]
    assert beam.CORE_ABILITIES[-1] == "multi_session_reasoning"


def test_bench_cost_on_beam_compares_with_the_sliding_window(tmp_path):
    out = io.StringIO()
    call_command(
        "bench_cost", "--dataset", write(tmp_path), "--budget", "1500", "--json", stdout=out
    )
    result = json.loads(out.getvalue())
    assert result["turns"] == 42  # the user's messages; the assistant's are replies
    assert result["over_budget"] == 0
    assert result["sliding_window_per_turn"] > 0
    assert result["ratio_to_sliding_window"] == pytest.approx(
        result["billed_per_turn"] / result["sliding_window_per_turn"], abs=0.001
    )
    # One conversation: its own figures are the whole run's.
    [own] = result["per_conversation"]
    assert own["sliding_window_per_turn"] == result["sliding_window_per_turn"]
    assert own["ratio_to_sliding_window"] == result["ratio_to_sliding_window"]


def test_the_users_standing_instruction_is_kept_as_on_intake(tmp_path):
    dump = io.StringIO()
    kept = run_eval(write(tmp_path), EvalOptions(strategy="sliding_window", budget=2000), dump=dump)
    # Far behind the window, yet in every prompt of the user's, in their own words.
    assert kept["abilities"]["instruction_following"]["all_evidence_percent"] == 100.0
    contexts = [json.loads(line)["context"] for line in dump.getvalue().splitlines()]
    assert all("<user_instructions>" in c and INSTRUCTION in c for c in contexts)
    out = io.StringIO()
    call_command(
        "eval_recall",
        "--dataset",
        write(tmp_path),
        "--budget",
        "2000",
        "--strategy",
        "sliding_window",
        "--no-instructions",
        "--no-vector-cache",
        "--json",
        stdout=out,
    )
    left_out = json.loads(out.getvalue())
    assert left_out["abilities"]["instruction_following"]["all_evidence_percent"] == 0.0


def test_a_knowledge_update_reports_whether_its_newest_value_is_in_the_prompt(tmp_path):
    raw = conversation()
    raw["chat"][1]["turns"].append(
        [
            {"role": "user", "id": 84, "content": "My API answers in 250 ms since the cache."},
            {"role": "assistant", "id": 85, "content": "Noted, 250 ms now."},
        ]
    )
    raw["probing_questions"]["knowledge_update"] = [
        {
            "question": "How fast is my API?",
            "source_chat_ids": {"original_info": [2], "updated_info": [84]},
        }
    ]
    path = tmp_path / "beam.json"
    path.write_text(json.dumps([raw]), encoding="utf-8")
    (sample,) = datasets.load_samples(str(path))[1]
    update = next(q for q in sample.questions if q.category == "knowledge_update")
    assert update.evidence == ("2", "84") and update.latest == ("84",)
    assert all(not q.latest for q in sample.questions if q is not update)

    # The window holds the newest value only: the update's all-evidence misses, its latest
    # does not; other abilities report no such figure.
    window = run_eval(
        str(path), EvalOptions(strategy="sliding_window", budget=1200, instructions=False)
    )["abilities"]
    assert window["knowledge_update"]["all_evidence_percent"] == 0.0
    assert window["knowledge_update"]["latest_evidence_percent"] == 100.0
    assert "latest_evidence_percent" not in window["information_extraction"]
