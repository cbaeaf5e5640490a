"""What a summarisation request is about, beside its prompt. Pure.

The model summarizer (``summaries/summarizer/model.py``) asks a model in words; a real model
reads the prompt. The built-in offline provider is not a language model, so the request also
carries the same source as data (:class:`SummaryTask`): the offline provider answers it with
an extractive summary (:func:`extractive_summary`) instead of its usual description of the
context. Real providers ignore it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from chatplatform.core.tokens.base import TokenCounter

#: How long one extracted sentence may be, in characters.
SENTENCE_CHARS = 240
#: The share of the requested size the offline summary aims at (the summarizer may count
#: with another tokenizer than the offline provider's).
SIZE_SHARE = 0.85
MAX_FACTS = 8
MAX_QUESTIONS = 5
#: Tokens of the answer's headings and separators, in the estimate.
FRAME_TOKENS = 8

_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])\s+")
_NUMBER = re.compile(r"\d")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class SummarySource:
    """One item to summarise: a message (``speaker`` and its text) or an earlier summary
    (``speaker`` empty, ``label`` such as "messages 3-9")."""

    text: str
    speaker: str = ""
    role: str = "user"
    label: str = ""


@dataclass(frozen=True)
class SummaryTask:
    """A request to summarise ``sources`` (oldest first) in at most ``max_tokens`` tokens."""

    sources: Sequence[SummarySource]
    max_tokens: int


def extractive_summary(task: SummaryTask, counter: TokenCounter) -> str:
    """The JSON object the summarizer asks for (``summary``, ``facts``, ``open_questions``),
    built from the sources' own sentences; deterministic.

    The summary takes each source's first sentence with its speaker; when they do not all fit,
    the least informative (fewest distinct words) are left out first, the order is kept.
    Facts are later sentences with numbers in them; open questions are the questions of the
    user messages after the last reply.
    """
    budget = max(1, int(task.max_tokens * SIZE_SHARE))
    lines = [(index, _line(source)) for index, source in enumerate(task.sources)]
    kept = {index: line for index, line in lines if line}
    facts = _facts(task.sources)
    questions = _open_questions(task.sources)
    # Each item is counted once and left out by that count (a summary may cover thousands of
    # messages); the exact count of the whole answer decides, so the estimate only saves work.
    line_cost = {index: counter.count(line) + 1 for index, line in kept.items()}
    fact_cost = [counter.count(fact) + 3 for fact in facts]
    question_cost = [counter.count(question) + 3 for question in questions]
    estimate = sum(line_cost.values()) + sum(fact_cost) + sum(question_cost) + FRAME_TOKENS
    weakest_first = iter(sorted(kept.items(), key=lambda item: (_information(item[1]), -item[0])))
    while True:
        if estimate <= budget:
            answer = _answer([kept[index] for index in sorted(kept)], facts, questions)
            if counter.count(_rendered(answer)) <= budget:
                return json.dumps(answer, ensure_ascii=False)
        if facts:
            facts.pop()
            estimate -= fact_cost.pop()
        elif questions:
            questions.pop()
            estimate -= question_cost.pop()
        elif len(kept) > 1:
            index, _line_text = next(weakest_first)
            del kept[index]
            estimate -= line_cost[index]
        else:
            line = next(iter(kept.values()), "")
            return json.dumps(_answer([_cut(line, counter, budget)], [], []), ensure_ascii=False)


def _answer(lines: list[str], facts: list[str], questions: list[str]) -> dict[str, object]:
    summary = " ".join(lines) or "The conversation has no text to summarise."
    return {"summary": summary, "facts": facts, "open_questions": questions}


def _rendered(answer: dict[str, object]) -> str:
    """About the text the summarizer will count (summary, then the bullet lists)."""
    parts = [str(answer["summary"])]
    for items in (answer["facts"], answer["open_questions"]):
        if isinstance(items, list) and items:
            parts.append("Heading:\n" + "\n".join(f"- {item}" for item in items))
    return "\n\n".join(parts)


def _sentences(text: str) -> list[str]:
    flat = " ".join(text.split())
    return [s for s in _SENTENCE_END.split(flat) if s]


def _short(sentence: str) -> str:
    if len(sentence) <= SENTENCE_CHARS:
        return sentence
    return sentence[: SENTENCE_CHARS - 1].rstrip() + "…"


def _line(source: SummarySource) -> str:
    sentences = _sentences(source.text)
    if not sentences:
        return ""
    first = _short(sentences[0])
    if source.speaker:
        return f"{source.speaker}: {first}"
    if source.label:
        return f"({source.label}) {first}"
    return first


def _information(line: str) -> int:
    return len({word.lower() for word in _WORD.findall(line)})


def _facts(sources: Sequence[SummarySource]) -> list[str]:
    found: list[str] = []
    for source in sources:
        for sentence in _sentences(source.text)[1:]:
            if _NUMBER.search(sentence) and (fact := _short(sentence)) not in found:
                found.append(fact)
    return found[:MAX_FACTS]


def _open_questions(sources: Sequence[SummarySource]) -> list[str]:
    tail: list[SummarySource] = []
    for source in reversed(sources):
        if source.role != "user" or not source.speaker:
            break
        tail.insert(0, source)
    questions = [
        _short(sentence)
        for source in tail
        for sentence in _sentences(source.text)
        if sentence.endswith("?")
    ]
    return questions[:MAX_QUESTIONS]


def _cut(line: str, counter: TokenCounter, budget: int) -> str:
    """``line`` shortened word by word until it fits ``budget`` tokens."""
    words = line.split()
    while len(words) > 1 and counter.count(" ".join(words) + " …") > budget:
        words = words[: max(1, len(words) * 3 // 4)]
    return " ".join(words) + (" …" if len(words) < len(line.split()) else "")
