"""Where a missed question's evidence went: shown whole, as its head, or not at all."""

from __future__ import annotations

from tooling.evaluation.locomo import Question, Turn
from tooling.evaluation.misses import HEAD_CHARS, states


def test_each_evidence_message_is_whole_head_or_absent():
    reply = "Sure, here is how to retry with backoff. " * 10
    turns = {
        "1": Turn("1", "user", "My app hits the rate limit."),
        "2": Turn("2", "assistant", reply),
        "3": Turn("3", "user", "hmm, what if it keeps retrying?"),
    }
    question = Question("How did you suggest handling retries?", "x", ("1", "2", "3", "9"))
    context = f"[user]\nMy app hits the rate limit.\n\n[assistant]\n{reply[:HEAD_CHARS]} …"
    assert list(states(context, question, turns)) == ["whole", "head", "absent", "absent"]
    assert list(states(context + reply, question, turns))[1] == "whole"
