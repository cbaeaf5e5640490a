"""The summarizer that needs no model: extractive, pure Python, no downloads.

Sentences are ranked and the best are kept verbatim (with their speaker) until the summary's
token size is reached:

- *centrality*: cosine of the sentence's TF-IDF vector (sentences as documents) with the
  centroid of all sentences; linear in the text, unlike a full similarity graph;
- *position*: a message's first sentence, and the first and last messages of the span;
- *entities*: numbers, dates, times, money and units, links, acronyms, capitalised names;
- *decision cues* ("agreed", "deadline", "will"...), sentence length and speaker role;
- *redundancy*: a sentence too similar to one already kept is skipped (MMR-style).

``facts`` are the most entity-rich sentences; ``open_questions`` are questions that no later
message of another speaker answered (no reply, a reply that is itself only questions, or an
"I don't know"). The three parts share the budget (questions up to 15 %, facts up to 30 %, the
summary the rest and whatever the others leave), and the rendered text is checked with the
real counter, dropping the weakest items until it fits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from chatplatform.core.tokens.base import TokenCounter

from .render import render_summary
from .text import (
    UNCERTAIN_REPLY,
    centroid,
    cosine,
    decision_cue,
    entity_score,
    is_question,
    split_sentences,
    terms,
    tfidf_vectors,
    word_count,
)
from .types import (
    EXTRACTIVE_MODEL,
    EXTRACTIVE_VERSION,
    SourceMessage,
    SourceSummary,
    StructuredSummary,
    SummaryDraft,
    SummaryFailed,
)

QUESTION_SHARE = 0.15
FACT_SHARE = 0.30
FACT_MIN_ENTITY = 1.5
REDUNDANCY = 0.65
ANSWER_LOOKAHEAD = 4
MAX_SENTENCE_CHARS = 1200
ROLE_WEIGHT = {"user": 1.0, "assistant": 0.9, "tool": 0.6, "system": 0.5}
ROLE_LABEL = {"user": "User", "assistant": "Assistant", "tool": "Tool", "system": "System"}
LINE_OVERHEAD = 2  # "- " or the line break, counted generously


@dataclass(slots=True)
class Candidate:
    order: int
    group: int
    position: int
    speaker: str
    role: str
    text: str
    terms: list[str]
    vector: dict[str, float] = field(default_factory=dict)
    entity: float = 0.0
    question: bool = False
    score: float = 0.0
    tokens: int = 0

    @property
    def line(self) -> str:
        return f"{self.speaker}: {self.text}" if self.speaker else self.text


def _speaker(message: SourceMessage) -> str:
    label = " ".join(message.author.split()) if message.author else ""
    return (label or ROLE_LABEL.get(message.role, "User")).replace(":", "")[:80]


def _clip(sentence: str) -> str:
    if len(sentence) <= MAX_SENTENCE_CHARS:
        return sentence
    return sentence[: MAX_SENTENCE_CHARS - 1].rstrip() + "…"


class ExtractiveSummarizer:
    """Extractive engine; ``counter`` measures the summary's size (the policy model's)."""

    engine = "extractive"
    model = EXTRACTIVE_MODEL

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    # --- public API -----------------------------------------------------------------------

    def summarize_messages(
        self, messages: Sequence[SourceMessage], *, max_tokens: int, purpose: str = "rolling"
    ) -> SummaryDraft:
        ordered = sorted(messages, key=lambda m: m.seq)
        candidates: list[Candidate] = []
        per_message: list[list[Candidate]] = []
        for index, message in enumerate(ordered):
            speaker = _speaker(message)
            own: list[Candidate] = []
            for position, sentence in enumerate(split_sentences(message.content)):
                cand = Candidate(
                    order=len(candidates),
                    group=index,
                    position=position,
                    speaker=speaker,
                    role=message.role,
                    text=_clip(sentence),
                    terms=terms(sentence),
                )
                candidates.append(cand)
                own.append(cand)
            per_message.append(own)
        if not candidates:
            raise SummaryFailed("empty", "nothing to summarise: the messages have no text")
        self._score(candidates, groups=len(ordered))
        questions = self._open_questions(ordered, per_message)
        facts = [c for c in candidates if not c.question and c.entity >= FACT_MIN_ENTITY]
        facts.sort(key=lambda c: (-(c.entity * 0.25 + c.score), c.order))
        return self._build(candidates, facts, questions, max_tokens)

    def merge_summaries(
        self, summaries: Sequence[SourceSummary], *, max_tokens: int
    ) -> SummaryDraft:
        ordered = sorted(summaries, key=lambda s: (s.first_seq, s.last_seq))
        candidates: list[Candidate] = []
        facts: list[Candidate] = []
        questions: list[Candidate] = []
        for index, summary in enumerate(ordered):
            for position, sentence in enumerate(split_sentences(summary.content.summary)):
                candidates.append(self._plain(len(candidates), index, position, sentence))
            for fact in summary.content.facts:
                facts.append(self._plain(10_000_000 + len(facts), index, 0, fact))
            for question in summary.content.open_questions:
                questions.append(self._plain(20_000_000 + len(questions), index, 0, question))
        if not candidates and not facts:
            raise SummaryFailed("empty", "nothing to merge: the summaries are empty")
        everything = candidates + facts + questions
        self._score(everything, groups=len(ordered))
        for cand in questions:
            cand.question = True
        # A question a later summary talks about is probably no longer open.
        later_text = [
            [c for c in candidates if c.group > q.group and cosine(c.vector, q.vector) >= 0.3]
            for q in questions
        ]
        open_questions = [
            q for q, answers in zip(questions, later_text, strict=True) if not answers
        ]
        open_questions.sort(key=lambda c: (-c.group, c.order))
        facts = _dedupe(facts)
        facts.sort(key=lambda c: (-(c.entity * 0.25 + c.score + 0.05 * c.group), c.order))
        return self._build(candidates, facts, _dedupe(open_questions), max_tokens)

    # --- scoring --------------------------------------------------------------------------

    def _plain(self, order: int, group: int, position: int, sentence: str) -> Candidate:
        sentence = " ".join(sentence.split())
        return Candidate(
            order=order,
            group=group,
            position=position,
            speaker="",
            role="user",
            text=_clip(sentence),
            terms=terms(sentence),
        )

    def _score(self, candidates: list[Candidate], *, groups: int) -> None:
        vectors = tfidf_vectors([c.terms for c in candidates])
        center = centroid(vectors)
        for cand, vec in zip(candidates, vectors, strict=True):
            cand.vector = vec
        centrality = [cosine(c.vector, center) for c in candidates]
        top = max(centrality) or 1.0
        edge = max(1, groups // 10)
        for cand, central in zip(candidates, centrality, strict=True):
            cand.entity = entity_score(cand.text)
            cand.question = is_question(cand.text)
            words = word_count(cand.text)
            bonus = 0.12 if cand.position == 0 else 0.0
            if cand.group < edge or cand.group >= groups - edge:
                bonus += 0.05
            bonus += 0.25 * min(1.0, cand.entity / 3.0)
            if decision_cue(cand.terms):
                bonus += 0.1
            length = 0.4 if words < 3 else 0.75 if words < 5 else 0.85 if words > 60 else 1.0
            cand.score = (0.6 * central / top + bonus) * length * ROLE_WEIGHT.get(cand.role, 0.8)

    def _open_questions(
        self, messages: list[SourceMessage], per_message: list[list[Candidate]]
    ) -> list[Candidate]:
        """Questions no later message of another speaker answered, newest first."""
        speakers = [_speaker(m) for m in messages]
        found: list[Candidate] = []
        for index, own in enumerate(per_message):
            asked = [c for c in own if c.question and word_count(c.text) >= 2]
            if asked and not self._answered(index, messages, per_message, speakers):
                found.extend(asked)
        found.sort(key=lambda c: -c.order)
        return _dedupe(found)

    @staticmethod
    def _answered(
        index: int,
        messages: list[SourceMessage],
        per_message: list[list[Candidate]],
        speakers: list[str],
    ) -> bool:
        for later in range(index + 1, min(len(messages), index + 1 + ANSWER_LOOKAHEAD)):
            if speakers[later] == speakers[index]:
                continue
            if UNCERTAIN_REPLY.search(messages[later].content):
                return False
            sentences = per_message[later]
            if sentences and all(c.question for c in sentences):
                continue  # answered with a question: look at the next reply
            return bool(sentences)
        return False

    # --- selection within the budget ------------------------------------------------------

    def _measure(self, cand: Candidate) -> int:
        if not cand.tokens:
            cand.tokens = self.counter.count(cand.line) + LINE_OVERHEAD
        return cand.tokens

    def _build(
        self,
        candidates: list[Candidate],
        facts: list[Candidate],
        questions: list[Candidate],
        max_tokens: int,
    ) -> SummaryDraft:
        heading = 6  # "Facts:" / "Open questions:" and blank lines
        taken: set[int] = set()
        chosen_q = self._greedy(questions, int(max_tokens * QUESTION_SHARE) - heading, taken)
        chosen_f = self._greedy(facts, int(max_tokens * FACT_SHARE) - heading, taken)
        spent = sum(c.tokens for c in chosen_q + chosen_f) + heading * (
            bool(chosen_q) + bool(chosen_f)
        )
        ranked = sorted(candidates, key=lambda c: (-c.score, c.order))
        avoid = [c.vector for c in chosen_f]
        chosen_s = self._greedy(ranked, max_tokens - spent, taken, redundancy=avoid)
        if not chosen_s:
            chosen_s = self._forced_line(ranked or facts, max_tokens, chosen_f, chosen_q)
        shrink = 1.0
        while True:
            content = StructuredSummary(
                summary=_summary_text(chosen_s),
                facts=tuple(c.line for c in sorted(chosen_f, key=lambda c: c.order)),
                open_questions=tuple(c.line for c in sorted(chosen_q, key=lambda c: c.order)),
            )
            text = render_summary(content)
            count = self.counter.count(text)
            if count <= max_tokens:
                break
            # Drop the weakest item: questions, then facts, then summary sentences.
            for pool in (chosen_q, chosen_f, chosen_s):
                if pool and (pool is not chosen_s or len(pool) > 1):
                    pool.pop()
                    break
            else:
                shrink *= 0.8
                if shrink < 0.05:
                    raise SummaryFailed("oversized", "the summary cannot fit its token size")
                chosen_s = self._forced_line(chosen_s, max_tokens, [], [], shrink=shrink)
        return SummaryDraft(
            content=content,
            text=text,
            token_count=count,
            token_counter=self.counter.name,
            model=EXTRACTIVE_MODEL,
            prompt_version=EXTRACTIVE_VERSION,
            engine=self.engine,
        )

    def _greedy(
        self,
        pool: Iterable[Candidate],
        cap: int,
        taken: set[int],
        redundancy: list[dict[str, float]] | None = None,
    ) -> list[Candidate]:
        chosen: list[Candidate] = []
        kept_vectors = list(redundancy or [])
        used = 0
        for cand in pool:
            if cap - used <= LINE_OVERHEAD:
                break
            if cand.order in taken:
                continue
            if any(cosine(cand.vector, v) > REDUNDANCY for v in kept_vectors):
                continue
            cost = self._measure(cand)
            if used + cost > cap:
                continue
            chosen.append(cand)
            kept_vectors.append(cand.vector)
            taken.add(cand.order)
            used += cost
        return chosen

    def _forced_line(
        self,
        ranked: list[Candidate],
        max_tokens: int,
        facts: list[Candidate],
        questions: list[Candidate],
        shrink: float = 1.0,
    ) -> list[Candidate]:
        """Nothing fits whole: keep the best sentence cut to the room left (marked ``…``)."""
        if not ranked:
            raise SummaryFailed("empty", "no sentence to summarise")
        best = ranked[0]
        room = max(8, int((max_tokens - sum(c.tokens for c in facts + questions) - 4) * shrink))
        text = best.text
        while text and self.counter.count(f"{best.speaker}: {text}…") > room:
            text = text[: max(1, int(len(text) * 0.8))]
            if len(text) <= 1:
                break
        cut = Candidate(
            order=best.order,
            group=best.group,
            position=best.position,
            speaker=best.speaker,
            role=best.role,
            text=text.rstrip() + "…",
            terms=best.terms,
            vector=best.vector,
        )
        return [cut]


def _summary_text(chosen: list[Candidate]) -> str:
    """One line per source message (or summary sentence), chronological; a gap between two
    kept sentences of the same message is shown as ``…``."""
    lines: list[str] = []
    previous: Candidate | None = None
    for cand in sorted(chosen, key=lambda c: c.order):
        same = (
            previous is not None
            and cand.speaker
            and previous.group == cand.group
            and previous.speaker == cand.speaker
        )
        if same and previous is not None:
            glue = " " if cand.position == previous.position + 1 else " … "
            lines[-1] += glue + cand.text
        else:
            lines.append(cand.line)
        previous = cand
    return "\n".join(lines)


def _dedupe(candidates: list[Candidate]) -> list[Candidate]:
    seen: set[str] = set()
    out: list[Candidate] = []
    for cand in candidates:
        key = " ".join(cand.text.casefold().split())
        if key in seen:
            continue
        seen.add(key)
        out.append(cand)
    return out
