"""The LoCoMo format and recall scoring (pure)."""

from __future__ import annotations

from datetime import datetime

import pytest

from tooling.evaluation import locomo


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (["D1:3"], ["D1:3"]),
        (["D8:6; D9:17"], ["D8:6", "D9:17"]),
        (["D:11:26"], ["D11:26"]),
        (["D30:05"], ["D30:5"]),
        (["D1:3", "d1:3", " D2 : 4 "], ["D1:3", "D2:4"]),
        (["nonsense", ""], []),
    ],
)
def test_evidence_ids_are_normalised(raw, expected):
    assert locomo.normalise_evidence(raw) == expected


def test_session_dates_and_captions():
    assert locomo.parse_date_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56)
    assert locomo.parse_date_time("12:09 am on 13 Sept, 2023") == datetime(2023, 9, 13, 0, 9)
    assert (
        locomo.turn_text({"text": "Look!", "blip_caption": "a dog on a beach"})
        == "Look! [shares a photo: a dog on a beach]"
    )
    assert locomo.turn_text({"text": "Hi"}) == "Hi"


def test_sample_parsing_ignores_generated_summaries():
    sample = locomo.parse_sample(
        {
            "sample_id": "s",
            "conversation": {
                "speaker_a": "A",
                "speaker_b": "B",
                "session_2_date_time": "9:00 am on 2 May, 2023",
                "session_2": [{"speaker": "B", "dia_id": "D2:1", "text": "later"}],
                "session_1_date_time": "9:00 am on 1 May, 2023",
                "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "first"}],
            },
            "qa": [{"question": "q?", "answer": "x", "evidence": ["D1:1"], "category": 4}],
            "observation": {"x": "must not be used"},
            "session_summary": {"x": "must not be used"},
        }
    )
    assert [t.text for t in sample.turns()] == ["first", "later"]
    assert sample.speakers == ("A", "B")
    assert sample.questions[0].evidence == ("D1:1",)


def test_presence_ignores_escaping_and_layout_but_not_truncation():
    prompt = "[2023-05-08 13:56] @Al: Tom &amp; Jerry &lt;3\n  second line"
    assert locomo.evidence_present(prompt, ["Tom & Jerry <3\nsecond   line"]) == [True]
    cut = "[2023-05-08 13:56] @Al: Tom &amp; [… 5 tokens omitted …] line"
    assert locomo.evidence_present(cut, ["Tom & Jerry <3 second line", ""]) == [False, False]


def test_presence_of_a_message_that_itself_holds_an_entity():
    # HTML code quoting ``&times;``: a data block shows it escaped once, the recent history
    # as written; both hold the message.
    message = '<span aria-hidden="true">&times;</span> close'
    block = "@user: &lt;span aria-hidden=&quot;true&quot;&gt;&amp;times;&lt;/span&gt; close"
    history = f"[user]\n{message}"
    assert locomo.evidence_present(block, [message]) == [True]
    assert locomo.evidence_present(history, [message]) == [True]
    assert locomo.evidence_present(block, ['<span aria-hidden="true">+</span> close']) == [False]


def test_tally_counts_all_and_any():
    tally = locomo.Tally()
    tally.add([True, True])
    tally.add([True, False])
    tally.add([False, False])
    tally.add([True])
    assert tally.as_dict() == {
        "questions": 4,
        "all_evidence_percent": 50.0,
        "any_evidence_percent": 75.0,
    }
    assert locomo.Tally().as_dict()["all_evidence_percent"] == 0.0


def test_policy_budget_covers_the_whole_prompt():
    fields = locomo.eval_policy_fields("hybrid", 4000)
    assert fields["max_context_tokens"] - fields["reserved_response_tokens"] == 4000
    # The standing instructions' sixteenth comes out of retrieval's share.
    assert fields["instructions_budget"] == 4000 // 16
    assert fields["retrieval_budget"] == 4000 - 200 - 400 - 4000 // 16
    without = locomo.eval_policy_fields("hybrid", 4000, instructions=False)
    assert without["instructions_budget"] == 0
    assert without["retrieval_budget"] == 4000 - 200 - 400
    assert locomo.eval_policy_fields("sliding_window", 4000)["retrieval_max_items"] == 0
