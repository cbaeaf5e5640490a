"""Re-ranking candidates (pure): BM25, speaker and time cues, neighbouring turns."""

from __future__ import annotations

from dataclasses import replace

import pytest

from chatplatform.core.context.types import MessageItem
from chats.retrieval.query import build_query
from chats.retrieval.rerank import (
    Candidate,
    DocWords,
    RerankConfig,
    Scored,
    bm25_scores,
    follow_statements,
    neighbor_seqs,
    rank_candidates,
    ranked,
    replies_whole_for,
    rerank,
    score,
    to_retrieved,
)

NO_NEIGHBORS = RerankConfig(neighbor_next=0.0, neighbor_prev=0.0)


def cands(*texts, authors=None):
    authors = authors or [None] * len(texts)
    return [
        Candidate(i + 1, i + 1, t, a) for i, (t, a) in enumerate(zip(texts, authors, strict=True))
    ]


def test_bm25_rewards_rare_terms_and_near_inflections():
    q = build_query("dog pelican")
    docs = ["the dog barked"] * 5 + ["a pelican landed", "dog and pelican"]
    scores = [s for s, _ in bm25_scores(q.terms, docs, total_docs=50, k1=1.2, b=0.4)]
    assert scores[6] > scores[5] > scores[0]
    paint = build_query("paint")
    near, far = bm25_scores(paint.terms, ["painting", "paintbrushes"], total_docs=10, k1=1.2, b=0.0)
    assert near[0] > far[0] > 0


def test_named_speaker_is_not_a_search_word_but_a_boost():
    q = build_query("What did Caroline paint?")
    candidates = cands(
        "Hey Caroline, did you paint today?",  # the other speaker names her
        "I paint every weekend.",  # Caroline's own turn
        authors=["mel", "caro"],
    )
    ranked = rerank(
        q,
        candidates,
        total_docs=10,
        names={"caro": ["Caroline"], "mel": ["Melanie"]},
        config=NO_NEIGHBORS,
    )
    assert ranked[0].candidate.author == "caro"


def test_neighbours_inherit_a_share_of_the_hit():
    q = build_query("How did the kids handle the accident?")
    candidates = [Candidate(10, 10, "How did they handle the accident?", "a")]
    neighbors = [
        Candidate(9, 9, "The kids look cute.", "a"),
        Candidate(11, 11, "They were scared but fine.", "b"),
        Candidate(12, 12, "Good to hear.", "a"),
    ]
    config = RerankConfig(neighbor_next=0.5, neighbor_prev=0.25, neighbor_depth=2)
    scored = score(q, candidates, total_docs=100, config=config)
    assert neighbor_seqs(scored, hits=5, depth=2) == {8, 9, 11, 12}
    ranked = rerank(q, candidates, total_docs=100, neighbors=neighbors, config=config)
    by_seq = {s.candidate.seq: s for s in ranked}
    hit = by_seq[10].score
    assert by_seq[11].score == hit * 0.5 and by_seq[11].via == 10
    assert by_seq[9].score == hit * 0.25
    assert by_seq[12].score == hit * 0.25
    assert [s.candidate.seq for s in ranked] == [10, 11, 12, 9]  # ties: newer first


def test_to_retrieved_keeps_order_and_attaches_fetched_neighbors():
    items = {i: MessageItem(i, i, "user", f"m{i}") for i in range(1, 6)}
    ranked = rerank(
        build_query("m3"),
        [Candidate(3, 3, "m3")],
        total_docs=5,
        neighbors=[Candidate(i, i, f"m{i}") for i in (2, 4)],
    )
    out = to_retrieved(ranked, items, neighbors=1, max_items=2)
    assert [r.message.seq for r in out] == [3, 4]
    assert {n.seq for n in out[0].neighbors} == {2, 4}


def test_a_reply_ranked_through_the_message_it_answers_is_marked_for_an_excerpt():
    items = {
        1: MessageItem(1, 1, "user", "Which zeppelin museum?"),
        2: MessageItem(2, 2, "assistant", "Friedrichshafen has one."),
        3: MessageItem(3, 3, "user", "Thanks"),
        4: MessageItem(4, 4, "assistant", "The zeppelin hangar tour is best."),
    }
    ranked = rerank(
        build_query("zeppelin"),
        [Candidate(1, 1, items[1].content, None, "user"), Candidate(4, 4, items[4].content)],
        total_docs=4,
        neighbors=[Candidate(2, 2, items[2].content, None, "assistant")],
    )
    out = {r.message.seq: r.excerpt for r in to_retrieved(ranked, items, neighbors=0)}
    # the reply found through its question is context; a reply with the words is a find
    assert out[2] is True and out[1] is False and out[4] is False


def test_a_question_about_a_reply_shows_a_reply_found_through_its_exchange_whole():
    items = {
        1: MessageItem(1, 1, "user", "How should I size the zeppelin hangar?"),
        2: MessageItem(2, 2, "assistant", "Start from the envelope's length, then add room."),
    }

    def retrieved(question: str, config: RerankConfig) -> dict[int, bool]:
        query = build_query(question)
        ranked = rerank(
            query,
            [Candidate(1, 1, items[1].content, None, "user")],
            total_docs=2,
            neighbors=[Candidate(2, 2, items[2].content, None, "assistant")],
            config=config,
        )
        whole = replies_whole_for(query, config)
        return {r.message.seq: r.excerpt for r in to_retrieved(ranked, items, replies_whole=whole)}

    default = RerankConfig()
    # the reply is what "did you recommend" asks for: it is not cut to its head
    assert retrieved("How did you recommend sizing the zeppelin hangar?", default)[2] is False
    # asking for advice now, or with the setting off, the reply stays context for its question
    assert retrieved("How would you size the zeppelin hangar?", default)[2] is True
    off = replace(default, recalled_replies_whole=False)
    assert retrieved("How did you recommend sizing the zeppelin hangar?", off)[2] is True


def test_neighbours_by_the_named_speaker_get_the_speaker_boost():
    q = build_query("What did Caroline cook?")
    candidates = cands("Did you cook anything nice?", authors=["mel"])
    neighbours = [Candidate(2, 2, "A big paella!", "caro"), Candidate(0, 0, "Hi", "mel")]
    ranked_ = rerank(
        q,
        candidates,
        total_docs=20,
        names={"caro": ["Caroline"], "mel": ["Melanie"]},
        neighbors=neighbours,
        config=RerankConfig(neighbor_depth=1, neighbor_next=0.6, neighbor_prev=0.6),
    )
    by_seq = {s.candidate.seq: s.score for s in ranked_}
    assert by_seq[2] > by_seq[0] and by_seq[2] > by_seq[1] * 0.6


def test_a_turn_between_two_hits_outranks_one_next_to_a_single_hit():
    q = build_query("pelican")
    hits = [Candidate(1, 1, "pelican one"), Candidate(3, 3, "pelican two")]
    neighbours = [Candidate(2, 2, "filler"), Candidate(4, 4, "filler")]
    config = RerankConfig(
        neighbor_depth=1, neighbor_next=0.6, neighbor_prev=0.6, neighbor_support=0.3
    )
    by_seq = {
        s.candidate.seq: s.score
        for s in rerank(q, hits, total_docs=50, neighbors=neighbours, config=config)
    }
    assert by_seq[1] == by_seq[3]
    assert by_seq[4] == pytest.approx(0.6 * by_seq[3])
    assert by_seq[2] == pytest.approx(0.6 * by_seq[1] * 1.3)


def test_rank_candidates_fetches_the_neighbours_of_the_best_hits_once():
    q = build_query("pelican")
    hits = [Candidate(5, 5, "a pelican"), Candidate(20, 20, "pelican again, a pelican")]
    turns = {i: Candidate(i, i, f"filler {i}") for i in range(1, 30)}
    calls: list[set[int]] = []

    def fetch(seqs):
        calls.append(set(seqs))
        return [turns[s] for s in sorted(seqs) if s != 21]  # 21 is not retrievable

    config = RerankConfig(neighbor_depth=1, neighbor_next=0.6, neighbor_prev=0.6)
    ranked_ = rank_candidates(
        q, hits, total_docs=30, names={}, config=config, neighbor_hits=1, fetch=fetch
    )
    assert calls == [{19, 21}]  # only around the best hit, and in one call
    assert [s.candidate.seq for s in ranked_] == [20, 5, 19]
    assert ranked_[2].via == 20


def test_rank_candidates_without_neighbours_fetches_nothing():
    def fetch(seqs):
        raise AssertionError("no fetch expected")

    ranked_ = rank_candidates(
        build_query("pelican"),
        [Candidate(1, 1, "pelican")],
        total_docs=3,
        names={},
        config=RerankConfig(neighbor_depth=0),
        neighbor_hits=5,
        fetch=fetch,
    )
    assert [s.candidate.seq for s in ranked_] == [1]


def test_the_other_half_of_an_exchange_inherits_the_whole_score():
    # A user's message matched by words: the assistant's reply right after it (what was
    # advised) comes with it at the same score; a user's message after the reply, or a turn
    # between two users, inherits the ordinary neighbour share.
    query = build_query("sourdough starter")
    pool = {
        1: Candidate(1, 1, "hello there", "u", "user"),
        2: Candidate(2, 2, "my sourdough starter is flat", "u", "user"),
        3: Candidate(3, 3, "feed it twice a day", None, "assistant"),
        4: Candidate(4, 4, "thanks, will try", "u", "user"),
    }
    config = RerankConfig(neighbor_depth=1, neighbor_support=0.0)
    ranked = rank_candidates(
        query,
        [pool[2]],
        total_docs=4,
        names={},
        config=config,
        neighbor_hits=5,
        fetch=lambda seqs: [pool[s] for s in seqs if s in pool],
    )
    scores = {s.candidate.seq: s.score for s in ranked}
    assert scores[3] == pytest.approx(scores[2] * config.reply_share)
    assert config.reply_share == 1.0
    assert scores[1] == pytest.approx(scores[2] * config.neighbor_prev)
    # Found by the reply's words, the message it answers comes with it.
    ranked = rank_candidates(
        build_query("feed twice"),
        [pool[3]],
        total_docs=4,
        names={},
        config=config,
        neighbor_hits=5,
        fetch=lambda seqs: [pool[s] for s in seqs if s in pool],
    )
    scores = {s.candidate.seq: s.score for s in ranked}
    assert scores[2] == pytest.approx(scores[3])
    assert scores[4] == pytest.approx(scores[3] * config.neighbor_next)


def _reference_bm25(terms, docs, *, total_docs, k1, b):
    """BM25 as defined: every word of every document compared with every term."""
    import math

    from chats.retrieval.query import fold, words_of
    from chats.retrieval.rerank import NEAR_EXTENSION

    def tf(term, words, compact):
        if term.bigram:
            return float(compact.count(term.text))
        return sum(
            1.0 if len(w) - len(term.text) <= NEAR_EXTENSION else 0.5
            for w in words
            if term.matches(w)
        )

    words = [words_of(d) for d in docs]
    tfs = [
        [tf(t, w, fold(d).replace(" ", "")) for t in terms]
        for w, d in zip(words, docs, strict=True)
    ]
    n = max(total_docs, len(docs))
    df = [sum(1 for row in tfs if row[j] > 0) for j in range(len(terms))]
    idf = [math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for d in df]
    avgdl = sum(len(w) for w in words) / len(words) or 1.0
    out = []
    for row, w in zip(tfs, words, strict=True):
        norm = k1 * (1.0 - b + b * len(w) / avgdl)
        value = sum(
            idf[j] * terms[j].weight * f * (k1 + 1.0) / (f + norm)
            for j, f in enumerate(row)
            if f > 0
        )
        out.append((value, sum(1 for f in row if f > 0)))
    return out


@pytest.mark.parametrize(
    "question",
    [
        "What did we decide about the release and the budget?",
        "When did Caroline paint the sunrise with her kids?",
        "我们需要完成测试 Рухнула релиза",
    ],
)
def test_bm25_scores_equal_the_per_word_definition(question):
    # Scoring folds and splits each document once and compares a term with each distinct
    # word once: the scores are exactly those of comparing it with every word.
    from tooling.benchmarks.scratch_data import message_texts

    docs = [*message_texts(pool=120), "paint painted paintings painterly", "", "中文测试我们"]
    terms = build_query(question).terms
    fast = bm25_scores(terms, docs, total_docs=1000, k1=1.2, b=0.4)
    assert fast == _reference_bm25(terms, docs, total_docs=1000, k1=1.2, b=0.4)
    assert any(matched for _, matched in fast)
    # Again with every document's words already counted (the process's memo): the same.
    assert bm25_scores(terms, docs, total_docs=1000, k1=1.2, b=0.4) == fast


def test_word_counts_are_kept_within_their_bound_and_recent_ones_survive():
    memo = DocWords(max_chars=40)
    assert memo.get("Painting, paints; PAINTED") == (3, {"painting": 1, "paints": 1, "painted": 1})
    memo.get("x" * 25)  # past half the bound: a text this long is counted, never kept
    assert "x" * 25 not in memo._young and "x" * 25 not in memo._old
    for text in ("one two", "three four", "five six", "seven eight"):
        memo.get(text)
    memo.get("one two")  # asked for again: survives the next swap
    for text in ("nine ten", "eleven twelve"):
        memo.get(text)
    kept = {**memo._old, **memo._young}
    assert sum(len(t) for t in kept) <= memo.max_chars
    assert "one two" in kept and "Painting, paints; PAINTED" not in kept


def test_a_replaced_value_passes_its_score_to_the_latest_and_back():
    one, two, three, other = cands("900 ms", "400 ms", "250 ms", "unrelated")
    scored = {1: Scored(one, 6.0), 4: Scored(other, 5.0)}
    follow_statements(scored, [(two, three), (one, two)], RerankConfig())
    # Oldest pair first: the value said first reaches the latest through the middle one;
    # ties go to the newer message, so the current value ranks first.
    order = [s.candidate.seq for s in ranked(scored)]
    assert order == [3, 2, 1, 4]
    assert all(s.via is None for s in scored.values())


def test_a_hit_on_the_latest_value_brings_the_earlier_with_a_share():
    one, two = cands("900 ms", "250 ms")
    scored = {2: Scored(two, 10.0)}
    follow_statements(scored, [(one, two)], RerankConfig(older_statement=0.6))
    assert scored[1].score == pytest.approx(6.0)
    assert scored[2].score == 10.0


def test_a_statement_keeps_its_own_better_score():
    one, two = cands("900 ms", "250 ms")
    scored = {1: Scored(one, 3.0), 2: Scored(two, 8.0, via=99)}
    follow_statements(scored, [(one, two)], RerankConfig(older_statement=0.25))
    assert scored[1].score == 3.0  # 0.25 x 8 = 2 is less than its own
    assert scored[2].score == 8.0 and scored[2].via == 99  # untouched


def test_rank_candidates_asks_for_statements_of_the_best_hits_once():
    texts = ["the dashboard takes 900 ms", "small talk", "it is down to 250 ms now"]
    candidates = cands(*texts)
    asked = []

    def statements(hits):
        asked.append([c.seq for c in hits])
        return [(candidates[0], candidates[2])]

    order = rank_candidates(
        build_query("How slow is the dashboard?"),
        candidates[:2],
        total_docs=3,
        names={},
        config=NO_NEIGHBORS,
        neighbor_hits=5,
        fetch=lambda seqs: [],
        statements=statements,
    )
    assert asked == [[1]]
    assert [s.candidate.seq for s in order][:2] == [3, 1]


def _exchanges():
    # Two exchanges about a deadline: the user's own statement, and a reply that restates
    # the words more often (replies elaborate what they answer).
    return [
        Candidate(1, 1, "my deadline for the deployment is March 1", "u", "user"),
        Candidate(
            2,
            2,
            "A deadline plan: deployment deadline checks, deployment steps, deadline buffer",
            None,
            "assistant",
        ),
        Candidate(3, 3, "what about the tests?", "u", "user"),
        Candidate(4, 4, "Run the deployment tests before the deadline.", None, "assistant"),
    ]


def test_a_question_about_what_the_asker_said_prefers_their_own_messages():
    pool = _exchanges()
    config = RerankConfig(neighbor_next=0.0, neighbor_prev=0.0, reply_share=0.0)
    assert config.asker_boost == RerankConfig().asker_boost > 0

    def order(question, config=config):
        ranked = rerank(build_query(question), pool, total_docs=4, config=config)
        return [s.candidate.seq for s in ranked]

    # About the asker (I, my): the user's statement first.
    assert order("What deadline did I set for my deployment?")[0] == 1
    # The same words without the pronouns: the reply that repeats them wins, as before.
    assert order("deadline for the deployment")[0] == 2
    assert order("What deadline did I set?", replace(config, asker_boost=0.0))[0] == 2


def test_without_replies_no_role_is_preferred():
    # A group chat of people (every message a user's): the boost would move them all alike
    # against retrieved summaries, so it does not apply.
    pool = [Candidate(c.id, c.seq, c.text, c.author, "user") for c in _exchanges()]
    query = build_query("What deadline did I set for my deployment?")
    plain = score(query, pool, total_docs=4, config=RerankConfig(asker_boost=0.0))
    mine = score(query, pool, total_docs=4)
    assert [mine[s].score for s in mine] == pytest.approx([plain[s].score for s in plain])


def test_found_through_its_reply_the_askers_message_comes_first():
    # The reply matched the words; the user's message it answers inherits the reply's
    # score through the exchange, with the asker's share on top: "what did I say" is
    # answered by the user's own message first, the reply right behind it.
    pool = {c.seq: c for c in _exchanges()}
    config = RerankConfig(neighbor_depth=1, neighbor_support=0.0)

    def order(question):
        ranked = rank_candidates(
            build_query(question),
            [pool[4]],
            total_docs=4,
            names={},
            config=config,
            neighbor_hits=5,
            fetch=lambda seqs: [pool[s] for s in seqs if s in pool],
        )
        return [s.candidate.seq for s in ranked]

    assert order("Which tests did I plan to run?")[:2] == [3, 4]
    assert order("Which tests to run?")[:2] == [4, 3]  # a tie goes to the newer message


def _thread_pool():
    # A user's question (2), the reply (3), two short follow-ups (4, 6) with their replies,
    # then a long new request (8) and another short message after it (10).
    return {
        2: Candidate(2, 2, "how should my weather app handle the API rate limit?", "u", "user"),
        3: Candidate(3, 3, "Count the calls per minute and back off.", None, "assistant"),
        4: Candidate(4, 4, "hmm, what about rapid consecutive calls?", "u", "user"),
        5: Candidate(5, 5, "Debounce them.", None, "assistant"),
        6: Candidate(6, 6, "hmm, and if they keep retrying?", "u", "user"),
        7: Candidate(7, 7, "Lock them out for a while.", None, "assistant"),
        8: Candidate(8, 8, "Now something else entirely: " + "the layout " * 40, "u", "user"),
        9: Candidate(9, 9, "Sure.", None, "assistant"),
        10: Candidate(10, 10, "ok", "u", "user"),
    }


def _rank_rate_limit(candidates, config, fetch):
    return rank_candidates(
        build_query("rate limit"),
        candidates,
        total_docs=10,
        names={},
        config=config,
        neighbor_hits=5,
        fetch=fetch,
    )


def test_a_threads_short_follow_ups_rank_just_below_the_message_they_follow_up():
    pool = _thread_pool()
    calls: list[set[int]] = []

    def fetch(seqs):
        calls.append(set(seqs))
        return [pool[s] for s in sorted(seqs) if s in pool]

    config = RerankConfig(neighbor_depth=1, neighbor_support=0.0, follow_up_share=0.8)
    ranked_ = _rank_rate_limit([pool[2], pool[3]], config, fetch)
    scores = {s.candidate.seq: s.score for s in ranked_}
    assert len(calls) == 1 and {4, 6} <= calls[0]  # with the neighbours, in one call
    assert scores[4] == pytest.approx(0.8 * scores[2])
    assert scores[6] == pytest.approx(0.8 * scores[2])
    # A long message ends the thread: it is a request of its own, not a follow-up.
    assert 8 not in scores and 10 not in scores
    # Off, the follow-up across the reply gets only the ordinary neighbour share, if any.
    off = _rank_rate_limit([pool[2], pool[3]], replace(config, follow_up_share=0.0), fetch)
    assert {s.candidate.seq for s in off}.isdisjoint({6})


def test_another_persons_turn_is_not_a_follow_up_nor_is_anything_without_replies():
    pool = _thread_pool()
    pool[4] = Candidate(4, 4, "hmm, what about rapid consecutive calls?", "other", "user")
    config = RerankConfig(neighbor_depth=0, follow_up_share=0.8)

    def fetch(seqs):
        return [pool[s] for s in seqs if s in pool]

    assert {s.candidate.seq for s in _rank_rate_limit([pool[2], pool[3]], config, fetch)} == {2, 3}
    # People talking among themselves (no replies among the candidates): nothing is fetched.
    people = [Candidate(2, 2, "the API rate limit again", "u", "user")]

    def no_fetch(seqs):
        raise AssertionError("no fetch expected")

    assert [s.candidate.seq for s in _rank_rate_limit(people, config, no_fetch)] == [2]
