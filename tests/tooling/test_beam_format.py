"""Reading BEAM conversations (pure): batches grouped in parts, batch numbers and dates in the
forms a file may give them."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from tooling.evaluation import beam


def batch(number, first_id, anchor=None):
    user = {"role": "user", "id": first_id, "content": f"message {first_id} ->-> 1,1"}
    if anchor:
        user["time_anchor"] = anchor
    reply = {"role": "assistant", "id": first_id + 1, "content": f"reply {first_id + 1}"}
    return {"batch_number": number, "turns": [[user, reply]]}


def sample(chat):
    return {
        "sample_id": "parts",
        "chat": chat,
        "probing_questions": {
            "information_extraction": [{"question": "What was message 4?", "source_chat_ids": [4]}]
        },
    }


@pytest.mark.parametrize(
    "chat",
    [
        # parts as a list of lists of batches, each part numbering its batches from 1
        [
            [batch(1, 0, "March-15-2024"), batch(2, 2)],
            [batch(1, 4, "April-2-2024"), batch(2, 6)],
        ],
        # parts as a mapping by name, with a note beside the batches
        {
            "plan-1": [batch(1, 0, "March-15-2024"), batch(2, 2)],
            "plan-2": {
                "note": "the second part",
                "batches": [batch(1, 4, "April-2-2024"), batch(2, 6)],
            },
        },
    ],
)
def test_batches_grouped_in_parts_are_read_in_order_as_sessions(chat):
    parsed = beam.parse_sample(sample(chat))
    assert [s.number for s in parsed.sessions] == [1, 2, 3, 4]
    ids = [t.dia_id for s in parsed.sessions for t in s.turns]
    assert ids == [str(i) for i in range(8)]
    dates = [s.when for s in parsed.sessions]
    assert dates[0] == datetime(2024, 3, 15, 9, 0)
    assert dates[2] == datetime(2024, 4, 2, 9, 0)
    assert dates == sorted(dates) and len(set(dates)) == 4
    assert parsed.questions[0].evidence == ("4",)


def test_a_flat_chat_keeps_its_batch_numbers_and_a_bad_one_takes_the_next():
    chat = [batch(1, 0), batch("x", 2), batch(7, 4), batch(None, 6)]
    assert [s.number for s in beam.parse_sample(sample(chat)).sessions] == [1, 2, 7, 8]


@pytest.mark.parametrize(
    ("text", "when"),
    [
        ("March-15-2024", datetime(2024, 3, 15, 9, 0)),
        ("March 15, 2024", datetime(2024, 3, 15, 9, 0)),
        ("15 March 2024", datetime(2024, 3, 15, 9, 0)),
        ("2024-03-15", datetime(2024, 3, 15, 9, 0)),
        ("2024-02-30", None),
        ("Smarch-40-2024", None),
        ("", None),
    ],
)
def test_time_anchors_in_the_forms_a_file_may_use(text, when):
    assert beam.parse_anchor(text) == when


@pytest.mark.parametrize("encode", [json.dumps, repr])
def test_fields_stored_as_text_are_read_as_data(encode):
    raw = sample([batch(1, 0, "March-15-2024"), batch(2, 2), batch(3, 4)])
    plain = beam.parse_sample(raw)
    as_text = {
        **raw,
        "chat": encode(raw["chat"]),
        "probing_questions": encode(raw["probing_questions"]),
    }
    assert beam.parse_sample(as_text) == plain


def test_a_field_that_is_no_data_is_a_clear_error():
    raw = sample([batch(1, 0)])
    with pytest.raises(ValueError, match="neither JSON nor a literal"):
        beam.parse_sample({**raw, "chat": "not [a chat"})
    with pytest.raises(ValueError, match="probing_questions are not a mapping"):
        beam.parse_sample({**raw, "probing_questions": "[1, 2]"})
