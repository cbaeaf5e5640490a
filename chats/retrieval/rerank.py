"""Re-ranking the database's candidates in pure Python (nothing here imports Django).

The database returns up to a few hundred matching messages ranked by its own score (global
``bm25()`` on SQLite, IDF-weighted term presence on PostgreSQL). This module scores the same
candidates identically on both backends:

* **BM25** over the candidate texts, with document frequencies counted among the candidates
  (exact whenever the search returned every match, as an OR query over a bounded conversation
  usually does) and ``N`` = the conversation's message count. A word that only extends a
  prefix term by more than :data:`NEAR_EXTENSION` characters counts half (``art`` →
  ``artwork`` is probably another word, ``paint`` → ``painting`` is not).
* **speaker**: when the question names a participant (``What did Caroline paint?``), the name
  is left out of the lexical score (it mostly matches the *other* speaker's greetings) and that
  participant's own turns get ``speaker_boost`` (hits and neighbours alike).
* **the asker's own messages**: a question about what its asker said or did (``Which
  versions did I say I was using?``, ``my project``: first-person subject or possessive
  pronouns, :attr:`~chats.retrieval.query.SearchQuery.person`) in a conversation with the
  platform's replies gives the people's messages ``asker_boost`` (:func:`role_boosts`),
  hits and the halves of exchanges alike, as a named participant's turns get
  ``speaker_boost``: the user states their facts once, the replies restate and elaborate
  them and match the question's words more often.
* **neighbours**: the turns around a hit inherit a share of its lexical score
  (``neighbor_next`` / ``neighbor_prev`` per step, up to ``neighbor_depth`` steps), so they
  compete for the budget as items of their own: the answer to a question is often the next
  turn, and the turn that names the topic the one before. The other half of an exchange (the
  assistant's reply right after a user's message, and that message for the reply) inherits
  ``reply_share`` (the whole score by default: an exchange is found as one). A turn near
  several hits (or a hit near another) adds ``neighbor_support`` of the weaker score to the
  stronger one.
* **meaning** (optional, before the neighbours): the messages closest to the question by
  sentence embedding join the candidates, and the two rankings are fused by rank
  (:func:`fuse_rrf`, in a chat with the platform's replies among the candidates) or by score
  (:func:`fuse_dense`: a share of the best lexical score in proportion to the cosine; among
  people's own turns) (:func:`fusion_for`, ``chats.retrieval.dense``).
* **statements of a fact** (before the neighbours): when a fact saved from one message was
  replaced by a value said in a later one, a hit on either brings the other
  (:func:`follow_statements`): the latest value ranks with (and, on a tie, before) the
  earlier one that matched the question, and the earlier one comes with a share, so a prompt
  short of room keeps the current value and one with room shows both sides of the change.

(A "when" question favouring turns with time expressions was measured and removed: no
effect on LoCoMo, see ``tooling/evaluation/retrieval.md``.)
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from chatplatform.core.context.types import MessageItem, RetrievedItem

from .query import SearchQuery, Term, fold, folded_words

NEAR_EXTENSION = 3
#: Dense retrieval (measured on LoCoMo dev, ``tooling/evaluation/retrieval.md``): the top
#: :data:`DENSE_TOP_K` messages by cosine join the candidates, and each gets
#: ``DENSE_WEIGHT × best lexical × cosine / best cosine`` on top of its lexical score.
DENSE_TOP_K = 100
DENSE_WEIGHT = 0.5


@dataclass(frozen=True, slots=True)
class Candidate:
    """A message to score: ``author`` is an opaque key (e.g. the user id) or ``None``;
    ``role`` its role (``"user"``, ``"assistant"``...), where known."""

    id: int | str
    seq: int
    text: str
    author: object = None
    role: str | None = None


@dataclass(frozen=True, slots=True)
class RerankConfig:
    k1: float = 1.2
    b: float = 0.4
    speaker_boost: float = 1.0
    #: Share of a hit's score the turn after it (``next``) and before it (``prev``) inherit.
    neighbor_next: float = 0.6
    neighbor_prev: float = 0.6
    neighbor_depth: int = 2
    #: Share the other half of an exchange inherits instead of ``neighbor_next`` /
    #: ``neighbor_prev``: the assistant's reply right after a user's message, and that
    #: message for the reply. The reply answers exactly that message, so one is found
    #: through the other (what was asked, what was advised).
    reply_share: float = 1.0
    #: A turn that is a hit and near another hit (or near two hits) adds this share of the
    #: weaker of the two scores to the stronger: adjacent evidence supports each other.
    neighbor_support: float = 0.3
    #: How the words' and the meaning's rankings meet: ``"rrf"`` (:func:`fuse_rrf`, by rank)
    #: or ``"score"`` (:func:`fuse_dense`, by score); ``fusion`` where the platform's replies
    #: are among the candidates, ``people_fusion`` where they are not (people talking among
    #: themselves). Measured (``tooling/evaluation/retrieval.md``): long replies that restate
    #: the user's words spread the word scores widely, and by score a message that means the
    #: question but shares few words stays below them; people's short turns score on one
    #: compact scale, where a strong word match is strong evidence and ranks would flatten it.
    fusion: Literal["rrf", "score"] = "rrf"
    people_fusion: Literal["rrf", "score"] = "score"
    #: A statement of a fact and the one that replaced it (a fact saved from the first
    #: message was replaced by a value said in the second): the newer inherits this share of
    #: the older's score when that is more than its own (1.0: it ranks with the older, and a
    #: tie goes to the newer message, so the latest value is the one kept when room is
    #: short), the older this share of the newer's (both sides of the change).
    newer_statement: float = 1.0
    older_statement: float = 0.6
    #: Reciprocal-rank fusion's constant: a list's item at rank ``r`` (from 1) adds
    #: ``1 / (rrf_k + r)``.
    rrf_k: int = 60
    #: Rank fusion: a message is in the meaning's list only when its cosine is at least this
    #: share of the best one. The nearest ``top_k`` of a short conversation are all of it,
    #: unrelated messages included, and ranks alone would not tell them apart.
    rrf_min_cosine: float = 0.3
    #: A question about what its asker said or did (``What did I say about...``, ``my
    #: project``: :attr:`~chats.retrieval.query.SearchQuery.person` ``"asker"``) in a
    #: conversation with the platform's replies: the people's own messages get this share on
    #: their score, as a named participant's turns get ``speaker_boost`` ("I" names the
    #: asker). The user states their facts; a reply restates and elaborates them, so it
    #: matches more words of more questions and would rank above the statement.
    asker_boost: float = 1.0
    #: A question that asks what the platform said before (``How did you recommend...``:
    #: :attr:`~chats.retrieval.query.SearchQuery.recalls_reply`): a reply ranked through
    #: the user's message it answers goes whole, not as its head (:func:`to_retrieved`),
    #: since the reply is what is asked about. Measured (``tooling/evaluation/retrieval.md``):
    #: giving the replies a share on their score as well lost at small budgets.
    recalled_replies_whole: bool = True
    #: A user's short message right after the platform's reply to their own message (``hmm,
    #: what if the user keeps retrying?``) follows that message up: it means little alone
    #: and shares few of a question's words, so it inherits this share of the score of the
    #: message it follows up, down a thread of such follow-ups (:func:`follow_ups`). Only in
    #: a chat with the platform's replies; "short" is at most ``follow_up_chars``
    #: characters, and the best ``follow_up_hits`` hits have their follow-ups fetched.
    follow_up_share: float = 0.8
    follow_up_chars: int = 200
    follow_up_hits: int = 150
    follow_up_depth: int = 2


@dataclass(slots=True)
class Scored:
    candidate: Candidate
    score: float
    #: The id of the hit this neighbour inherited its score from (``None`` for hits).
    via: int | str | None = None
    matched: int = field(default=0)
    #: The lexical score before the speaker factor (what neighbours inherit a share of).
    lexical: float = 0.0


def speaker_terms(
    query: SearchQuery, names: Mapping[Any, Iterable[str]]
) -> tuple[set[object], set[str]]:
    """The authors the question names and the folded name words found in it."""
    words = set(query.words)
    authors: set[object] = set()
    found: set[str] = set()
    for author, author_names in names.items():
        hit = {fold(n) for n in author_names} & words
        if hit:
            authors.add(author)
            found |= hit
    return authors, found


#: Characters of documents whose word counts :data:`doc_words` keeps (about 10-20 MB of
#: counts for 2M characters of chat messages).
DOC_WORDS_MAX_CHARS = 2_000_000


class DocWords:
    """The word counts of documents this process ranked, by their exact text: ``(number of
    words, folded word -> occurrences)``. Thread-safe; bounded by the characters of the
    texts it holds (two generations, as ``chatplatform.core.context.meter.CountMemo``: a
    text used during the young generation survives the swap).

    Why: the candidates of a conversation's turns are mostly the same messages (the matches
    of its common words, the turns around the best), and folding and splitting a text is
    most of the cost of ranking it; its counts never change while its text does not."""

    def __init__(self, max_chars: int = DOC_WORDS_MAX_CHARS) -> None:
        self.max_chars = max_chars
        self._young: dict[str, tuple[int, dict[str, int]]] = {}
        self._old: dict[str, tuple[int, dict[str, int]]] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, text: str) -> tuple[int, dict[str, int]]:
        """``(number of words, counts of the folded words)`` of ``text``."""
        found = self._young.get(text)
        if found is not None:
            return found
        found = self._old.get(text)
        if found is None:
            words = folded_words(fold(text))
            found = (len(words), dict(Counter(words)))
        if len(text) <= self.max_chars // 2:
            with self._lock:
                if self._chars + len(text) > self.max_chars // 2:
                    self._old, self._young, self._chars = self._young, {}, 0
                self._young[text] = found
                self._chars += len(text)
        return found

    def clear(self) -> None:
        with self._lock:
            self._young, self._old, self._chars = {}, {}, 0


#: The process's word counts of ranked documents.
doc_words = DocWords()


def _matching_words(terms: Sequence[Term], vocabulary: Iterable[str]) -> list[dict[str, float]]:
    """For each (non-bigram) term, the words of ``vocabulary`` it matches and what one
    occurrence counts: 1, or 0.5 for a word that extends a prefix term by more than
    :data:`NEAR_EXTENSION` characters. Bigram terms get an empty map (they are counted in
    the text)."""
    words = list(vocabulary)
    out: list[dict[str, float]] = []
    for term in terms:
        text = term.text
        if term.bigram:
            out.append({})
        elif not term.prefix:
            out.append({text: 1.0})
        else:
            longest = len(text) + NEAR_EXTENSION
            out.append({w: 1.0 if len(w) <= longest else 0.5 for w in words if w.startswith(text)})
    return out


def bm25_scores(
    terms: Sequence[Term], docs: Sequence[str], *, total_docs: int, k1: float, b: float
) -> list[tuple[float, int]]:
    """``(score, matched term count)`` of each document for the OR of ``terms``.

    Each document's words are counted once per process while turns keep ranking it
    (:data:`doc_words`); each term is compared once with each
    distinct word of all the documents (the words it matches, and what each counts), and a
    document's term frequency is the sum over the matched words it holds (whole and half
    occurrences, so the sums are exact whatever the order)."""
    if not docs or not terms:
        return [(0.0, 0)] * len(docs)
    bigrams = any(t.bigram for t in terms)
    stats = [doc_words.get(doc) for doc in docs]
    lengths = [length for length, _ in stats]
    vocabulary: set[str] = set()
    for _, c in stats:
        vocabulary.update(c)
    matching = _matching_words(terms, vocabulary)
    tfs: list[list[float]] = []
    for doc, (_, c) in zip(docs, stats, strict=True):
        compact = fold(doc).replace(" ", "") if bigrams else ""
        row: list[float] = []
        for term, words in zip(terms, matching, strict=True):
            if term.bigram:
                row.append(float(compact.count(term.text)))
                continue
            tf = 0.0
            for word, share in words.items():
                n = c.get(word)
                if n:
                    tf += n if share == 1.0 else share * n
            row.append(tf)
        tfs.append(row)
    n = max(total_docs, len(docs))
    df = [sum(1 for row in tfs if row[j] > 0) for j in range(len(terms))]
    idf = [math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for d in df]
    avgdl = sum(lengths) / len(lengths) or 1.0
    out: list[tuple[float, int]] = []
    for i, row in enumerate(tfs):
        norm = k1 * (1.0 - b + b * lengths[i] / avgdl)
        score = sum(
            idf[j] * terms[j].weight * tf * (k1 + 1.0) / (tf + norm)
            for j, tf in enumerate(row)
            if tf > 0
        )
        out.append((score, sum(1 for tf in row if tf > 0)))
    return out


def score(
    query: SearchQuery,
    candidates: Sequence[Candidate],
    *,
    total_docs: int,
    names: Mapping[Any, Iterable[str]] | None = None,
    config: RerankConfig | None = None,
) -> dict[int, Scored]:
    """Lexical score of each candidate (by ``seq``) with the speaker boost.

    ``names`` maps an author key to the names a question may call them by."""
    config = config or RerankConfig()
    authors, name_words = speaker_terms(query, names or {})
    lexical = query.without(name_words) if name_words else query
    if lexical.is_empty:
        lexical = query
    scores = bm25_scores(
        lexical.terms,
        [c.text for c in candidates],
        total_docs=total_docs,
        k1=config.k1,
        b=config.b,
    )
    roles = role_boosts(query, candidates, config)
    scored: dict[int, Scored] = {}
    for c, (value, matched) in zip(candidates, scores, strict=True):
        scored[c.seq] = Scored(c, value * _factor(c, authors, config, roles), None, matched, value)
    return scored


def role_boosts(
    query: SearchQuery, candidates: Iterable[Candidate], config: RerankConfig
) -> dict[str, float]:
    """The share each role's messages get on their score for this question: the people's
    (``"user"``) ``asker_boost`` when it asks about what its asker said or did (not what
    the one asked said: ``What did you recommend for my app?`` stays as it is). Only in a
    conversation with replies among the candidates: in a group chat of people every message
    is a user's, and the boost would only move them all against retrieved summaries."""
    if query.person != "asker" or config.asker_boost <= 0:
        return {}
    if not has_replies(candidates):
        return {}
    return {"user": config.asker_boost}


def replies_whole_for(query: SearchQuery, config: RerankConfig) -> bool:
    """Whether this question's replies go whole when ranked through their exchange
    (:attr:`RerankConfig.recalled_replies_whole`, for a question that recalls a reply)."""
    return config.recalled_replies_whole and query.recalls_reply


def has_replies(candidates: Iterable[Candidate]) -> bool:
    """Whether the platform's replies are among the candidates (a chat with the assistant,
    not only among people)."""
    return any(c.role == "assistant" for c in candidates)


def fusion_for(candidates: Sequence[Candidate], config: RerankConfig) -> str:
    """How this retrieval fuses the two rankings: ``config.fusion`` in a chat with the
    platform's replies among the candidates, ``config.people_fusion`` otherwise."""
    return config.fusion if has_replies(candidates) else config.people_fusion


def _factor(
    candidate: Candidate,
    named: frozenset[object] | set[object],
    config: RerankConfig,
    roles: Mapping[str, float],
) -> float:
    """The speaker factor of a candidate: ``speaker_boost`` when its author is named,
    plus its role's share (:func:`role_boosts`)."""
    factor = 1.0 + config.speaker_boost if named and candidate.author in named else 1.0
    if roles and candidate.role is not None:
        factor += roles.get(candidate.role, 0.0)
    return factor


def neighbor_seqs(scored: Mapping[int, Scored], *, hits: int, depth: int) -> set[int]:
    """Sequence numbers around the best ``hits`` candidates (``depth`` on each side) that
    are not candidates themselves: what to fetch for :func:`propagate`."""
    best = sorted(scored.values(), key=lambda s: (-s.score, -s.candidate.seq))[:hits]
    out = {
        s.candidate.seq + d * sign
        for s in best
        if s.score > 0
        for d in range(1, depth + 1)
        for sign in (-1, 1)
    }
    return {seq for seq in out if seq > 0 and seq not in scored}


def ranked(scored: Mapping[int, Scored]) -> list[Scored]:
    """Best first; ties go to the newer message."""
    return sorted(scored.values(), key=lambda s: (-s.score, -s.candidate.seq))


def rerank(
    query: SearchQuery,
    candidates: Sequence[Candidate],
    *,
    total_docs: int,
    names: Mapping[Any, Iterable[str]] | None = None,
    neighbors: Sequence[Candidate] = (),
    config: RerankConfig | None = None,
) -> list[Scored]:
    """:func:`score`, then :func:`propagate` to ``neighbors`` (messages adjacent to
    candidates, fetched without matching), best first."""
    config = config or RerankConfig()
    scored = score(query, candidates, total_docs=total_docs, names=names, config=config)
    roles = role_boosts(query, candidates, config)
    propagate(scored, neighbors, config, speaker_terms(query, names or {})[0], roles)
    return ranked(scored)


def rank_candidates(
    query: SearchQuery,
    candidates: Sequence[Candidate],
    *,
    total_docs: int,
    names: Mapping[Any, Iterable[str]],
    config: RerankConfig,
    neighbor_hits: int,
    fetch: Callable[[set[int]], Sequence[Candidate]],
    dense: Mapping[int, float] | None = None,
    dense_weight: float = DENSE_WEIGHT,
    statements: Callable[[list[Candidate]], Sequence[tuple[Candidate, Candidate]]] | None = None,
) -> list[Scored]:
    """The whole re-ranking of one retrieval, best first: :func:`score` the search's
    ``candidates``, :func:`fuse_dense` the ``dense`` top hits (seq → cosine; their rows must
    be among ``candidates``), :func:`follow_statements` from the best ``neighbor_hits`` to
    the statements that replaced theirs or that theirs replaced (``statements``: one call
    with those hits, it returns ``(older, newer)`` pairs), ``fetch`` the turns around the
    best ``neighbor_hits`` (one call, with the wanted seqs; it returns those that exist and
    may be retrieved), and :func:`propagate` to them. The retriever fetches from the
    database; the offline harness (``tooling/evaluation/locomo_offline.py``) from memory."""
    scored = score(query, candidates, total_docs=total_docs, names=names, config=config)
    authors = speaker_terms(query, names)[0]
    roles = role_boosts(query, candidates, config)
    if dense:
        if fusion_for(candidates, config) == "rrf":
            fuse_rrf(scored, dense, named=authors, config=config, roles=roles)
        else:
            fuse_dense(
                scored, dense, weight=dense_weight, named=authors, config=config, roles=roles
            )
    if statements is not None:
        best = ranked(scored)[:neighbor_hits]
        pairs = statements([s.candidate for s in best if s.score > 0])
        if pairs:
            follow_statements(scored, pairs, config)
    near = neighbor_seqs(scored, hits=neighbor_hits, depth=config.neighbor_depth)
    threads = follow_up_seqs(scored, candidates, config)
    wanted = near | threads
    neighbors = fetch(wanted) if wanted else []
    propagate(scored, [n for n in neighbors if n.seq in near], config, authors, roles)
    if threads:
        follow_ups(scored, neighbors, config)
    return ranked(scored)


def _thread_heads(scored: Mapping[int, Scored], config: RerankConfig) -> list[Scored]:
    """The best ``follow_up_hits`` people's messages, whose follow-ups are looked for."""
    best = ranked(scored)[: config.follow_up_hits]
    return [s for s in best if s.score > 0 and s.candidate.role == "user"]


def follow_up_seqs(
    scored: Mapping[int, Scored], candidates: Sequence[Candidate], config: RerankConfig
) -> set[int]:
    """The turns that may follow up the best people's messages (every second turn after
    each, ``follow_up_depth`` deep: a reply between each) and are not candidates: what to
    fetch for :func:`follow_ups`. None where nothing inherits, or in a chat without the
    platform's replies (people talking among themselves take turns; the next turn of the
    same person is not a follow-up of theirs)."""
    if config.follow_up_share <= 0 or not has_replies(candidates):
        return set()
    return {
        s.candidate.seq + 2 * step
        for s in _thread_heads(scored, config)
        for step in range(1, config.follow_up_depth + 1)
    } - set(scored)


def follow_ups(
    scored: dict[int, Scored], fetched: Sequence[Candidate], config: RerankConfig
) -> None:
    """A thread's follow-ups rank just below the message they follow up: for each of the
    best people's messages, the next message of the same author two turns later (the reply
    between) that is at most ``follow_up_chars`` long inherits ``follow_up_share`` of its
    score, and the one after it too while each is such a follow-up. A turn keeps the best of
    its own score and what it inherits; a follow-up is shown whole, never as a head."""
    by_seq = {c.seq: c for c in fetched}
    for head in _thread_heads(scored, config):
        seq = head.candidate.seq
        for _ in range(config.follow_up_depth):
            seq += 2
            current = scored.get(seq)
            candidate = current.candidate if current is not None else by_seq.get(seq)
            if (
                candidate is None
                or candidate.role != "user"
                or candidate.author != head.candidate.author
                or len(candidate.text) > config.follow_up_chars
            ):
                break
            inherited = head.score * config.follow_up_share
            if current is None:
                scored[seq] = Scored(candidate, inherited, head.candidate.id)
            elif current.score < inherited:
                current.score, current.via = inherited, head.candidate.id


def follow_statements(
    scored: dict[int, Scored],
    pairs: Sequence[tuple[Candidate, Candidate]],
    config: RerankConfig,
) -> None:
    """A fact's statements rank together, the latest first: for each ``(older, newer)``
    pair (the newer message replaced a value the older one said), the newer gets
    ``newer_statement`` of the older's score and the older ``older_statement`` of the
    newer's, when that is more than their own. Pairs go oldest first for the newer side and
    newest first for the older, so a value replaced twice passes its score to the latest
    and the latest to every earlier one."""
    forward = sorted(pairs, key=lambda pair: (pair[1].seq, pair[0].seq))
    for older, newer in forward:
        _inherit(scored, newer, scored.get(older.seq), config.newer_statement)
    for older, newer in reversed(forward):
        _inherit(scored, older, scored.get(newer.seq), config.older_statement)


def _inherit(scored: dict[int, Scored], to: Candidate, source: Scored | None, share: float) -> None:
    if source is None or source.score <= 0 or share <= 0:
        return
    # Not marked ``via``: a statement is shown whole, never cut to its head as a reply
    # found through its exchange may be.
    inherited = source.score * share
    current = scored.get(to.seq)
    if current is None:
        scored[to.seq] = Scored(to, inherited)
    elif current.score < inherited:
        current.score, current.via = inherited, None


def fuse_dense(
    scored: dict[int, Scored],
    dense: Mapping[int, float],
    *,
    weight: float,
    named: frozenset[object] | set[object] = frozenset(),
    config: RerankConfig | None = None,
    roles: Mapping[str, float] | None = None,
) -> None:
    """Add meaning to the lexical scores, before neighbours inherit them: each candidate
    among the ``dense`` top hits (seq → cosine with the question) gets
    ``weight × (best lexical score) × cosine / best cosine`` on its lexical score (times the
    speaker factor, as lexical scores get), so the two scales meet at the best hit of each
    and dense hits pass a share to their neighbours like lexical ones. With no lexical hit
    the scale is 1. Candidates outside ``dense`` keep their scores."""
    config = config or RerankConfig()
    best_cosine = max(dense.values(), default=0.0)
    if best_cosine <= 0 or weight <= 0:
        return
    best_lexical = max((s.lexical for s in scored.values()), default=0.0)
    scale = weight * (best_lexical if best_lexical > 0 else 1.0) / best_cosine
    for seq, cosine in dense.items():
        current = scored.get(seq)
        if current is None or cosine <= 0:
            continue
        current.lexical += scale * cosine
        current.score = current.lexical * _factor(current.candidate, named, config, roles or {})
        current.matched = max(current.matched, 1)


def fuse_rrf(
    scored: dict[int, Scored],
    dense: Mapping[int, float],
    *,
    named: frozenset[object] | set[object] = frozenset(),
    config: RerankConfig | None = None,
    roles: Mapping[str, float] | None = None,
) -> None:
    """Reciprocal-rank fusion of the words' and the meaning's rankings, before neighbours
    inherit: each candidate gets ``1 / (rrf_k + rank)`` from each list it is in (its rank by
    lexical score among those that matched a term, and by cosine among the ``dense`` top
    hits whose cosine is at least ``rrf_min_cosine`` of the best). Ranks ignore the two
    scales, so a message near the top by meaning counts as much as one near the top by words
    however the lexical scores are spread (long messages, many matching terms). The fused
    value is put back on the lexical scale (the best fused candidate gets the best lexical
    score, 1 with no lexical hit), so retrieved summaries, scored by words, still compete on
    one scale; times the speaker factor."""
    config = config or RerankConfig()
    k = max(1, config.rrf_k)
    lexical = sorted(
        (s for s in scored.values() if s.lexical > 0),
        key=lambda s: (-s.lexical, -s.candidate.seq),
    )
    floor = max(0.0, config.rrf_min_cosine) * max(dense.values(), default=0.0)
    near = sorted(
        (
            (seq, cosine)
            for seq, cosine in dense.items()
            if seq in scored and cosine > 0 and cosine >= floor
        ),
        key=lambda pair: (-pair[1], -pair[0]),
    )
    fused: dict[int, float] = {}
    for rank, s in enumerate(lexical, start=1):
        fused[s.candidate.seq] = 1.0 / (k + rank)
    for rank, (seq, _) in enumerate(near, start=1):
        fused[seq] = fused.get(seq, 0.0) + 1.0 / (k + rank)
    best = max(fused.values(), default=0.0)
    if best <= 0:
        return
    best_lexical = lexical[0].lexical if lexical else 1.0
    for seq, value in fused.items():
        current = scored[seq]
        current.lexical = best_lexical * value / best
        current.score = current.lexical * _factor(current.candidate, named, config, roles or {})
        current.matched = max(current.matched, 1)


def propagate(
    scored: dict[int, Scored],
    neighbors: Sequence[Candidate],
    config: RerankConfig,
    named: frozenset[object] | set[object] = frozenset(),
    roles: Mapping[str, float] | None = None,
) -> None:
    """Neighbours inherit a share of each hit's own lexical score, times the speaker factor
    of the *neighbour's* author (``named``: the authors the question names), since the
    answer to a question about someone is usually in their own turn next to the one that
    carries the words, and the *neighbour's* role's share (``roles``, :func:`role_boosts`):
    the user's message a reply was found through comes before it for a question about what
    the asker said; a turn keeps the best of its own score and what it inherits."""
    if config.neighbor_next <= 0 and config.neighbor_prev <= 0:
        return
    by_seq = {n.seq: n for n in neighbors}
    hits = [(s.candidate, s.lexical or s.score) for s in scored.values() if s.score > 0]

    def factor(seq: int) -> float:
        current = scored.get(seq)
        return _factor(
            current.candidate if current is not None else by_seq[seq], named, config, roles or {}
        )

    def role(seq: int) -> str | None:
        current = scored.get(seq)
        if current is not None:
            return current.candidate.role
        return by_seq[seq].role if seq in by_seq else None

    for hit, base in hits:
        for distance in range(1, config.neighbor_depth + 1):
            for seq, share in (
                (hit.seq + distance, config.neighbor_next),
                (hit.seq - distance, config.neighbor_prev),
            ):
                inherited = base * share**distance
                if distance == 1 and _exchange(hit.role, role(seq), after=seq > hit.seq):
                    inherited = base * config.reply_share
                if inherited <= 0 or (seq not in scored and seq not in by_seq):
                    continue
                inherited *= factor(seq)
                current = scored.get(seq)
                if current is not None:
                    if current.score < inherited:
                        current.via = hit.id
                    weaker = min(current.score, inherited)
                    current.score = max(current.score, inherited)
                    current.score += config.neighbor_support * weaker
                elif seq in by_seq:
                    scored[seq] = Scored(by_seq[seq], inherited, hit.id)


def _exchange(hit: str | None, other: str | None, *, after: bool) -> bool:
    """Whether the message next to a hit is the other half of its exchange: the reply right
    after a user's message, or the user's message right before a reply."""
    if after:
        return hit == "user" and other == "assistant"
    return hit == "assistant" and other == "user"


def to_retrieved(
    ranked: Sequence[Scored],
    items: Mapping[int, MessageItem],
    *,
    neighbors: int = 1,
    max_items: int | None = None,
    replies_whole: bool = False,
) -> list[RetrievedItem]:
    """RetrievedItems (best first) for ranked candidates whose MessageItem (by ``seq``) is in
    ``items``; each carries the adjacent fetched messages (``neighbors`` on each side) and is
    marked ``excerpt`` when its score came from a neighbouring find, except the platform's
    replies with ``replies_whole`` (a question about what it said: :func:`replies_whole_for`)."""
    out: list[RetrievedItem] = []
    for s in ranked:
        item = items.get(s.candidate.seq)
        if item is None:
            continue
        near = tuple(
            items[seq]
            for d in range(1, neighbors + 1)
            for seq in (item.seq - d, item.seq + d)
            if seq in items
        )
        # A message ranked through a find next to it (the reply to a message that matched)
        # is shown for that exchange: the packer may show a long one as its head, unless
        # the question asks for the reply itself.
        excerpt = s.via is not None and not (replies_whole and item.role == "assistant")
        out.append(RetrievedItem(item, s.score, near, excerpt=excerpt))
        if max_items is not None and len(out) >= max_items:
            break
    return out
