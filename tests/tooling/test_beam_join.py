"""Joining BEAM conversations end to end: ids, references and dates move with the later part,
so every question still names its own evidence and the sessions stay in order."""

from __future__ import annotations

from tooling.evaluation import beam
from tooling.evaluation.beam_join import join


def _conversation(sample_id: str, date: str, words: tuple[str, str]) -> dict:
    return {
        "sample_id": sample_id,
        "size": "128K",
        "chat": [
            {
                "batch_number": 1,
                "time_anchor": date,
                "turns": [
                    [
                        {"role": "user", "id": 0, "content": f"I use {words[0]}."},
                        {"role": "assistant", "id": 1, "content": "Noted."},
                    ],
                    [{"role": "user", "id": 2, "content": f"Now I use {words[1]}."}],
                ],
            }
        ],
        "probing_questions": {
            "knowledge_update": [
                {
                    "question": f"What do I use ({sample_id})?",
                    "source_chat_ids": {"original_info": [0], "updated_info": [2]},
                }
            ],
            "information_extraction": [
                {
                    "question": f"What first ({sample_id})?",
                    "conversation_references": ["chat_id: 0"],
                }
            ],
        },
    }


def test_the_later_parts_questions_name_their_own_messages_and_dates_follow_on():
    first = _conversation("a", "March-10-2024", ("vim", "emacs"))
    second = _conversation("b", "January-01-2024", ("tabs", "spaces"))
    joined = join([first, second], "joined")
    sample = beam.parse_sample(joined)
    texts = {t.dia_id: t.text for t in sample.turns()}
    assert len(texts) == 6
    by_question = {q.question: q for q in sample.questions}
    later = by_question["What do I use (b)?"]
    assert [texts[e] for e in later.evidence] == ["I use tabs.", "Now I use spaces."]
    assert [texts[e] for e in later.latest] == ["Now I use spaces."]
    assert [texts[e] for e in by_question["What first (b)?"].evidence] == ["I use tabs."]
    assert [texts[e] for e in by_question["What first (a)?"].evidence] == ["I use vim."]
    first_when, second_when = (s.when for s in sample.sessions)
    assert (second_when - first_when).days == 7  # a week after the earlier part's last date
    assert first["chat"][0]["turns"][0][0]["id"] == 0  # the parts are left as they were
