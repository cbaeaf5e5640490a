"""Text features for the extractive summarizer: sentences, terms, entities, questions. Pure.

Language-neutral where it can be (Unicode word characters, digits, capitalisation, CJK
bigrams); the few word lists (stopwords, months, decision cues) cover English
plus common Russian/Ukrainian/German/French/Spanish words and are only bonuses, never needed.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter

_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]»”]*\s+(?=\S)|(?<=[。！？])")
_LIST_MARK = re.compile(r"^\s*(?:[-*•·]|\d{1,3}[.)])\s+")
_CODE_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_NUMBER = re.compile(r"\d")
_DATE = re.compile(
    r"\b\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}\b|\b\d{1,2}:\d{2}\b|"
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}\b|"
    r"\b\d{1,2}(?:st|nd|rd|th)?\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)|"
    r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|tomorrow|"
    r"yesterday|tonight|next week|next month)\b",
    re.IGNORECASE,
)
_MONEY_OR_UNIT = re.compile(r"[$€£¥₴₽]\s?\d|\d\s?(?:%|usd|eur|gbp|kg|km|mb|gb|tb|ms|h)\b", re.I)
_CONTACT = re.compile(r"\S+@\S+\.\w+|https?://\S+|\bwww\.\S+")
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,9}\b")
_QUESTION_END = re.compile(r"[?？]\s*[\"')\]»”]*\s*$")


def _wordlist(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOPWORDS = _wordlist(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves also yes ok okay oh well like get got let lets i'm it's don't that's
    и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее
    мне было вот от меня еще нет о из ему теперь когда даже ну вдруг ли если уже или ни быть был
    і та що це як але на до від ми ви він вона воно вони так ні чи й
    der die das und ist nicht ein eine zu den mit von ich du er sie es wir ihr auf für im dem
    le la les et est un une des du en pas que qui pour dans sur au avec ce il elle nous vous
    el los las y es un una de que en por con para no se lo como más pero
    """
)

DECISION_CUES = _wordlist(
    """
    decided decide decision agreed agree agreement plan planned will deadline must need needs
    confirmed confirm schedule scheduled booked book ordered order chose choose prefer prefers
    preferred budget priority todo deliver delivery launch release migrate fixed fix blocked
    решили договорились план нужно срок вирішили домовилися потрібно термін
    beschlossen vereinbart décidé convenu decidimos acordamos
    """
)

UNCERTAIN_REPLY = re.compile(
    r"\b(?:i don't know|i do not know|not sure|no idea|unclear|unknown|tbd|to be decided|"
    r"can't tell|cannot tell|will check|let me check|не знаю|не уверен|не впевнений|weiß nicht|"
    r"je ne sais pas|no sé)\b",
    re.IGNORECASE,
)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` in order: code blocks dropped, one per line of a list."""
    text = _CODE_FENCE.sub(" ", text)
    out: list[str] = []
    for line in text.splitlines():
        line = _LIST_MARK.sub("", line).strip()
        if not line:
            continue
        for piece in _SENTENCE_END.split(line):
            piece = " ".join(piece.split())
            if piece:
                out.append(piece)
    return out


def terms(text: str) -> list[str]:
    """Content terms: casefolded words without stopwords; CJK runs become character bigrams."""
    out: list[str] = []
    for word in _WORD.findall(text.casefold()):
        if _CJK.search(word):
            chars = [c for c in word if not c.isspace()]
            out.extend(a + b for a, b in itertools.pairwise(chars))
            if len(chars) == 1:
                out.append(chars[0])
            continue
        if word in STOPWORDS or (len(word) < 2 and not word.isdigit()):
            continue
        out.append(word)
    return out


def word_count(text: str) -> int:
    words = _WORD.findall(text)
    cjk = len(_CJK.findall(text))
    return len(words) + cjk // 2


def entity_score(sentence: str) -> float:
    """How much ``sentence`` looks like a concrete fact: numbers, dates, names, money, links."""
    score = 0.0
    if _NUMBER.search(sentence):
        score += 1.0
    score += 1.5 * min(2, len(_DATE.findall(sentence)))
    score += 1.0 * min(2, len(_MONEY_OR_UNIT.findall(sentence)))
    score += 1.0 * min(1, len(_CONTACT.findall(sentence)))
    score += 0.5 * min(2, len(_ACRONYM.findall(sentence)))
    words = _WORD.findall(sentence)
    names = sum(
        1
        for i, w in enumerate(words)
        if i > 0 and w[:1].isupper() and not w.isupper() and w.casefold() not in STOPWORDS
    )
    score += 0.7 * min(3, names)
    return score


def is_question(sentence: str) -> bool:
    return bool(_QUESTION_END.search(sentence) or sentence.startswith("¿"))


def decision_cue(sentence_terms: list[str]) -> bool:
    return any(t in DECISION_CUES for t in sentence_terms)


def tfidf_vectors(documents: list[list[str]]) -> list[dict[str, float]]:
    """Log-scaled TF-IDF vectors, L2-normalised (each document a list of terms)."""
    df: Counter[str] = Counter()
    for doc in documents:
        df.update(set(doc))
    n = len(documents)
    idf = {t: math.log((n + 1) / (d + 1)) + 1.0 for t, d in df.items()}
    vectors: list[dict[str, float]] = []
    for doc in documents:
        tf = Counter(doc)
        vec = {t: (1.0 + math.log(c)) * idf[t] for t, c in tf.items()}
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        vectors.append({t: v / norm for t, v in vec.items()})
    return vectors


def cosine(a: dict[str, float], b: dict[str, float]) -> float:
    """Cosine of two L2-normalised sparse vectors."""
    if len(a) > len(b):
        a, b = b, a
    return sum(v * b.get(t, 0.0) for t, v in a.items())


def centroid(vectors: list[dict[str, float]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for vec in vectors:
        for t, v in vec.items():
            total[t] = total.get(t, 0.0) + v
    norm = math.sqrt(sum(v * v for v in total.values())) or 1.0
    return {t: v / norm for t, v in total.items()}
