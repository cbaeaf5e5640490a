"""Retrieval by meaning: the embedding model, the stored vectors and their jobs, and the fusion
with full-text retrieval (on, off, unavailable), tenant-safe and with bounded queries.

The model is the real all-MiniLM-L6-v2 (requirements/embeddings.txt, part of dev.txt); it
loads once per test process, on first use."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from django.db import connection
from django_celery_beat.models import PeriodicTask

from chatplatform.models import ContextPolicy, Tenant
from chatplatform.models.conversations import Conversation, MessageEmbedding
from chatplatform.policies import DEFAULT_PRESET
from chatplatform.tenancy.scoping import ScopeError, all_tenants, tenant_scope
from chats import tasks
from chats.assembly import assemble_turn
from chats.assembly.records import breakdown
from chats.retrieval import RetrievalSettings, dense, embeddings, retrieve_messages
from chats.retrieval.dense import (
    WARM_UP_TEXT,
    dense_scores,
    dense_status,
    embed_conversation,
    embed_messages,
    missing_messages,
    question_soon,
    questions_warm_up,
    stored_vectors,
)
from chats.retrieval.query import build_query
from chats.retrieval.rerank import (
    Candidate,
    RerankConfig,
    Scored,
    bm25_scores,
    fuse_dense,
    fuse_rrf,
    rank_candidates,
)
from chats.retrieval.tasks import schedule_embedding
from chats.services import conversation_create, message_create
from tests.factories import make_policy
from tests.summaries.conftest import eager_celery, isolated_locks

from .conftest import add

__all__ = ["eager_celery", "isolated_locks"]

pytestmark = pytest.mark.django_db

needs_model = pytest.mark.skipif(
    not embeddings.available(), reason="the embeddings requirements are not installed"
)

#: Varied small talk: none shares a searchable word with the questions below.
FILLER = [
    "The weather was lovely this morning, sunny and warm.",
    "Our team meeting moved to Thursday afternoon.",
    "I cooked pasta with tomatoes and basil for lunch.",
    "The football match ended in a draw yesterday.",
    "My laptop battery drains far too quickly lately.",
    "We watched a documentary about the ocean last night.",
    "Traffic on the bridge was terrible again.",
    "The bakery on the corner sells excellent croissants.",
    "I finally finished reading that long novel.",
    "Our neighbours are repainting their fence blue.",
]
OLD_FACT = "We adopted a golden retriever puppy from the shelter in April."
QUESTION = "What kind of dog do we have?"


def filler(conversation, author, rounds=3):
    return add(conversation, author, *[f"{text} ({i})" for i in range(rounds) for text in FILLER])


def fresh(conversation):
    with tenant_scope(conversation.tenant_id):
        return Conversation.objects.get(pk=conversation.pk)


def vectors_of(tenant):
    with tenant_scope(tenant):
        return dict(MessageEmbedding.objects.values_list("message_id", "vector"))


def dense_policy(tenant, *, dense=True, name="dense hybrid"):
    return make_policy(
        tenant,
        name=name,
        strategy="hybrid",
        max_context_tokens=2000,
        reserved_response_tokens=500,
        system_budget=300,
        facts_budget=0,
        summaries_budget=0,
        retrieval_budget=300,
        min_recent_messages=2,
        recent_message_cap=4,
        retrieval_max_items=5,
        retrieval_dense=dense,
    )


def use_policy(conversation, policy):
    with tenant_scope(conversation.tenant_id):
        Conversation.objects.filter(pk=conversation.pk).update(policy=policy)
    conversation.policy = policy


@pytest.fixture
def story(conversation, member_a):
    """An old fact, then 30 turns of small talk (the fact is outside the recent window)."""
    (fact,) = add(conversation, member_a, OLD_FACT)
    filler(conversation, member_a)
    return fact


# --- the model ---------------------------------------------------------------------------


@needs_model
def test_close_meanings_score_higher_than_unrelated_ones():
    vectors = embeddings.embed(
        ["I love my dog", "My puppy is great", "The stock market crashed today"]
    )
    assert vectors.shape == (3, embeddings.DIMENSIONS) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    similar, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert similar > 0.5 and similar > unrelated + 0.3
    assert embeddings.embed([]).shape == (0, embeddings.DIMENSIONS)


@needs_model
def test_stored_form_round_trips_within_float16_precision():
    vector = embeddings.embed(["a sentence to store"])[0]
    blob = embeddings.to_bytes(vector)
    assert len(blob) == 2 * embeddings.DIMENSIONS
    (back,) = embeddings.from_bytes([blob])
    assert np.max(np.abs(back - vector)) < 1e-3


def test_unavailable_without_torch_and_never_raises(monkeypatch):
    monkeypatch.setattr(embeddings, "_installed", None)
    monkeypatch.setattr(embeddings, "_model", None)
    monkeypatch.setattr(embeddings, "find_spec", lambda name: None)
    assert embeddings.available() is False
    assert "not installed" in embeddings.unavailable_reason()
    with pytest.raises(embeddings.EmbeddingsUnavailable):
        embeddings.embed(["anything"])


def test_a_failed_load_is_remembered(monkeypatch):
    monkeypatch.setattr(embeddings, "_model", None)
    monkeypatch.setattr(embeddings, "_failed", "the embedding model failed to load: boom")
    assert embeddings.available() is False
    with pytest.raises(embeddings.EmbeddingsUnavailable, match="boom"):
        embeddings.embed(["anything"])


# --- the pure fusion ---------------------------------------------------------------------


def test_fusion_scales_cosines_to_the_best_lexical_score_before_neighbours():
    query = build_query("paella recipe")
    texts = {seq: f"small talk {seq}" for seq in range(1, 11)}
    texts[2], texts[8] = "the paella recipe", "saffron rice with prawns"
    pool = {seq: Candidate(seq, seq, text) for seq, text in texts.items()}

    def rank(dense=None):
        ranked = rank_candidates(
            query,
            [pool[2], pool[8]],
            total_docs=10,
            names={},
            config=RerankConfig(fusion="score"),
            neighbor_hits=5,
            fetch=lambda seqs: [pool[s] for s in seqs if s in pool],
            dense=dense,
            dense_weight=0.5,
        )
        return {s.candidate.seq: s for s in ranked}

    lexical = rank()
    best = lexical[2].lexical
    fused = rank({8: 0.8, 2: 0.4})
    assert fused[8].lexical == pytest.approx(0.5 * best * 0.8 / 0.8)
    assert fused[2].lexical == pytest.approx(best + 0.5 * best * 0.4 / 0.8)
    # The meaning-only hit passes a share of its score to its neighbours, as words do.
    assert 9 not in lexical and fused[9].via == 8 and fused[9].score > 0


def test_fusion_without_lexical_hits_ranks_by_cosine():
    scored = {seq: Scored(Candidate(seq, seq, "x"), 0.0) for seq in (1, 2)}
    fuse_dense(scored, {1: 0.2, 2: 0.6}, weight=0.5)
    assert scored[2].score == pytest.approx(0.5) and scored[1].score == pytest.approx(0.5 / 3)


def test_rank_fusion_lets_a_top_meaning_hit_beat_a_middling_word_hit():
    # Scores by words spread widely (long messages, many terms); by rank, the message nearest
    # in meaning stands with the best word hit whatever its own word score.
    scored = {
        seq: Scored(Candidate(seq, seq, "x"), value, lexical=value)
        for seq, value in {1: 30.0, 2: 25.0, 3: 2.0, 4: 0.0}.items()
    }
    by_score = {seq: Scored(s.candidate, s.score, lexical=s.lexical) for seq, s in scored.items()}
    fuse_dense(by_score, {3: 0.9, 4: 0.5}, weight=0.5)
    assert by_score[3].score < by_score[2].score
    fuse_rrf(scored, {3: 0.9, 4: 0.5}, config=RerankConfig(rrf_k=60))
    assert scored[3].score > scored[2].score and scored[4].score > 0
    # Back on the words' scale: the best fused message gets the best word score.
    assert max(s.score for s in scored.values()) == pytest.approx(30.0)
    assert scored[1].score == pytest.approx(30.0 * (1 / 61) / (1 / 63 + 1 / 61))


def test_rank_fusion_leaves_out_messages_far_from_the_nearest_in_meaning():
    # In a short conversation the nearest by meaning are all of it: those well below the best
    # cosine get no rank from the meaning's list.
    scored = {seq: Scored(Candidate(seq, seq, "x"), 0.0) for seq in (1, 2, 3)}
    fuse_rrf(scored, {1: 0.5, 2: 0.2, 3: 0.1}, config=RerankConfig(rrf_min_cosine=0.3))
    assert scored[1].score == pytest.approx(1.0)
    assert scored[2].score == pytest.approx((1 / 62) / (1 / 61))
    assert scored[3].score == 0.0


def test_rank_fusion_in_the_ranking_passes_shares_to_neighbours():
    query = build_query("paella recipe")
    texts = {seq: f"small talk {seq}" for seq in range(1, 11)}
    texts[2], texts[8] = "the paella recipe", "saffron rice with prawns"
    pool = {seq: Candidate(seq, seq, text) for seq, text in texts.items()}
    ranked = rank_candidates(
        query,
        [pool[2], pool[8]],
        total_docs=10,
        names={},
        config=RerankConfig(fusion="rrf", people_fusion="rrf"),
        neighbor_hits=5,
        fetch=lambda seqs: [pool[s] for s in seqs if s in pool],
        dense={8: 0.8, 2: 0.4},
    )
    fused = {s.candidate.seq: s for s in ranked}
    # The word hit is first in both lists; the meaning-only hit first by meaning alone.
    assert fused[2].score > fused[8].score > 0
    assert fused[8].lexical == pytest.approx(fused[2].lexical * (1 / 61) / (1 / 61 + 1 / 62))
    assert fused[9].via == 8 and fused[9].score > 0


@pytest.mark.parametrize(("reply_role", "by_rank"), [("assistant", True), ("user", False)])
def test_a_chat_with_replies_fuses_by_rank_and_one_among_people_by_score(reply_role, by_rank):
    query = build_query("paella recipe")
    pool = {
        1: Candidate(1, 1, "the paella recipe, the paella recipe again", role="user"),
        2: Candidate(2, 2, "a paella recipe", role=reply_role),
        3: Candidate(3, 3, "saffron rice with prawns", role="user"),
    }
    ranked = rank_candidates(
        query,
        list(pool.values()),
        total_docs=10,
        names={},
        config=RerankConfig(neighbor_next=0.0, neighbor_prev=0.0),
        neighbor_hits=0,
        fetch=lambda seqs: [],
        dense={3: 0.9, 1: 0.3},
        dense_weight=0.5,
    )
    fused = {s.candidate.seq: s for s in ranked}
    lexical = dict(
        zip(
            pool,
            (
                v
                for v, _ in bm25_scores(
                    query.terms, [c.text for c in pool.values()], total_docs=10, k1=1.2, b=0.4
                )
            ),
            strict=True,
        )
    )
    if by_rank:  # the nearest in meaning stands with the best word hit, on its scale
        assert fused[3].score > fused[2].score
        assert max(s.score for s in ranked) == pytest.approx(lexical[1])
    else:  # half the best word score times its share of the best cosine
        assert fused[3].score == pytest.approx(0.5 * lexical[1])
        assert fused[1].score == pytest.approx(lexical[1] + 0.5 * lexical[1] * 0.3 / 0.9)


def test_top_by_cosine_is_bounded():
    seqs = np.arange(1, 11, dtype=np.int64)
    vectors = np.eye(10, dtype=np.float32)
    top = embeddings.top_by_cosine(seqs, vectors, vectors[6], 3)
    assert len(top) == 3 and top[7] == pytest.approx(1.0)
    assert embeddings.top_by_cosine(seqs[:0], vectors[:0], vectors[0], 3) == {}


# --- storing vectors ---------------------------------------------------------------------


@needs_model
def test_embedding_a_conversation_is_idempotent(conversation, member_a, tenant_a):
    add(conversation, member_a, "First message.")
    message_create(conversation=conversation, role="user", content="   ", validate=False)
    message_create(conversation=conversation, role="assistant", content="Oops", status="failed")
    add(conversation, member_a, "Third message.")
    first = embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    assert (first.status, first.embedded) == ("done", 3)  # the failed reply is skipped
    stored = vectors_of(tenant_a)
    assert len(stored) == 3
    assert b"\x00" * 2 * embeddings.DIMENSIONS in stored.values()  # the blank one: zeros
    again = embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    assert (again.status, again.embedded) == ("done", 0)
    # Rows that already have a vector are ignored by the insert itself, too.
    rows = [{"id": m, "conversation_id": conversation.pk, "seq": 1, "content": "x"} for m in stored]
    embed_messages(tenant_a.pk, rows[:1])
    assert vectors_of(tenant_a) == stored


@needs_model
def test_embedding_runs_in_bounded_batches(conversation, member_a, tenant_a):
    filler(conversation, member_a, rounds=1)
    result = embed_conversation(tenant_a.pk, conversation.pk, limit=4, check_policy=False)
    assert result.as_dict() == {"status": "more", "embedded": 4, "index": ""}
    # Newest first: the turns the next question is likeliest to need.
    assert missing_messages(tenant_a.pk, conversation.pk, limit=100)[0]["seq"] == 6


@needs_model
def test_a_conversation_whose_policy_is_lexical_is_not_embedded(conversation, member_a, tenant_a):
    add(conversation, member_a, "Hello there.")
    assert embed_conversation(tenant_a.pk, conversation.pk).status == "off"
    use_policy(conversation, dense_policy(tenant_a))
    assert embed_conversation(tenant_a.pk, conversation.pk).status == "done"


# --- the jobs ----------------------------------------------------------------------------


@needs_model
def test_embedding_task_is_idempotent_and_tenant_safe(
    conversation, member_a, tenant_a, tenant_b, member_b, eager_celery
):
    use_policy(conversation, dense_policy(tenant_a))
    filler(conversation, member_a, rounds=1)
    theirs = conversation_create(tenant=tenant_b, created_by=member_b)
    use_policy(theirs, dense_policy(tenant_b))
    add(theirs, member_b, "Their message.")
    task = tasks.embed_conversation_messages
    assert task.apply(args=(tenant_a.pk, conversation.pk)).get()["embedded"] == 10
    assert task.apply(args=(tenant_a.pk, conversation.pk)).get()["embedded"] == 0
    # Tenant A's id with tenant B's conversation finds nothing and writes nothing.
    assert task.apply(args=(tenant_a.pk, theirs.pk)).get() == {
        "status": "missing",
        "embedded": 0,
        "index": "",
    }
    assert vectors_of(tenant_b) == {}
    assert task.acks_late and task.soft_time_limit < task.time_limit


@needs_model
def test_embedding_task_re_enqueues_while_more_remain(
    conversation, member_a, tenant_a, eager_celery, monkeypatch
):
    from chats.retrieval import dense

    use_policy(conversation, dense_policy(tenant_a))
    filler(conversation, member_a, rounds=1)
    real = dense.embed_conversation
    runs = []

    def small_batches(tenant_id, conversation_id, **kwargs):
        runs.append(1)
        return real(tenant_id, conversation_id, limit=3, **kwargs)

    monkeypatch.setattr(dense, "embed_conversation", small_batches)
    tasks.embed_conversation_messages.apply(args=(tenant_a.pk, conversation.pk)).get()
    assert len(vectors_of(tenant_a)) == 10 and len(runs) == 4


@needs_model
def test_reply_hook_schedules_once_per_window_after_commit(
    conversation, member_a, tenant_a, django_capture_on_commit_callbacks, eager_celery
):
    add(conversation, member_a, "Hello.")
    assert schedule_embedding(fresh(conversation)) is False  # the policy is lexical
    use_policy(conversation, dense_policy(tenant_a))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert schedule_embedding(fresh(conversation)) is True
        assert schedule_embedding(fresh(conversation)) is False  # one per window
    assert len(callbacks) == 1 and vectors_of(tenant_a) == {}
    callbacks[0]()
    assert len(vectors_of(tenant_a)) == 1


def test_reply_hook_never_raises(conversation, monkeypatch):
    from chats.retrieval import tasks as retrieval_tasks

    def broken(*args, **kwargs):
        raise RuntimeError("database gone")

    monkeypatch.setattr(retrieval_tasks, "policy_for", broken)
    assert schedule_embedding(conversation) is False


@needs_model
def test_backfill_sweeps_dense_conversations_in_batches(
    tenant_a, tenant_b, member_a, member_b, eager_celery, settings
):
    by_override = conversation_create(tenant=tenant_a, created_by=member_a)
    use_policy(by_override, dense_policy(tenant_a))
    lexical = conversation_create(tenant=tenant_a, created_by=member_a)
    via_tenant = conversation_create(tenant=tenant_b, created_by=member_b)
    Tenant.objects.filter(pk=tenant_b.pk).update(active_policy=dense_policy(tenant_b))
    for conversation, author in ((by_override, member_a), (lexical, member_a)):
        add(conversation, author, "One.", "Two.")
    add(via_tenant, member_b, "Three.")
    result = tasks.backfill_message_embeddings.apply(kwargs={"batch_size": 1}).get()
    assert result["status"] == "done" and result["queued"] == 2 and result["scanned"] == 2
    assert len(vectors_of(tenant_a)) == 2 and len(vectors_of(tenant_b)) == 1
    with tenant_scope(tenant_a):
        assert not MessageEmbedding.objects.filter(conversation=lexical).exists()
    assert tasks.backfill_message_embeddings.apply().get() == {"status": "duplicate"}
    settings.SUMMARIES_LOCK_PREFIX += ":second"
    assert tasks.backfill_message_embeddings.apply().get()["queued"] == 0


def test_backfill_does_nothing_without_the_model(monkeypatch, eager_celery):
    monkeypatch.setattr(embeddings, "available", lambda: False)
    assert tasks.backfill_message_embeddings.apply().get() == {"status": "unavailable"}


@needs_model
def test_the_start_up_loads_the_question_model_when_a_policy_retrieves_by_meaning(
    tenant_a, member_a, monkeypatch
):
    with all_tenants():
        ContextPolicy.objects.update(retrieval_dense=False)
    started: list[str] = []

    def soon(text: str) -> None:
        started.append(text)

    monkeypatch.setattr(dense, "question_soon", soon)
    assert questions_warm_up() is None and started == []
    # A policy (or preset) nobody uses loads nothing; a tenant's active one, a
    # conversation's own, or the default preset where a tenant has none does.
    policy = dense_policy(tenant_a, name="dense at start")
    assert questions_warm_up() is None and started == []
    tenant_a.active_policy = policy
    tenant_a.save(update_fields=["active_policy"])
    questions_warm_up()
    assert started == [WARM_UP_TEXT]
    tenant_a.active_policy = None
    tenant_a.save(update_fields=["active_policy"])
    with all_tenants():
        ContextPolicy.objects.filter(tenant__isnull=True, name=DEFAULT_PRESET).update(
            retrieval_dense=True
        )
    questions_warm_up()
    assert started == [WARM_UP_TEXT] * 2
    with all_tenants():
        ContextPolicy.objects.update(retrieval_dense=False)
        ContextPolicy.objects.filter(pk=policy.pk).update(retrieval_dense=True)
    conversation = conversation_create(tenant=tenant_a, created_by=member_a)
    with all_tenants():
        Conversation.objects.filter(pk=conversation.pk).update(policy=policy)
    questions_warm_up()
    assert started == [WARM_UP_TEXT] * 3
    monkeypatch.undo()
    # Really embedded on the question thread: the model is loaded when the future is done.
    warmed = questions_warm_up()
    assert warmed is not None
    vector = warmed.result(timeout=120)
    assert vector is not None and vector.shape == (embeddings.DIMENSIONS,)


def test_the_start_up_warm_up_never_raises(monkeypatch):
    def broken() -> bool:
        raise RuntimeError("database is down")

    monkeypatch.setattr(dense, "_some_policy_dense", broken)
    assert questions_warm_up() is None


def test_backfill_is_scheduled_in_the_database():
    periodic = PeriodicTask.objects.get(name="chats: backfill message embeddings")
    assert periodic.task == "chats.tasks.backfill_message_embeddings" and periodic.enabled
    assert (periodic.interval.every, periodic.interval.period) == (10, "minutes")


# --- retrieval ---------------------------------------------------------------------------


def _retrieve(conversation, *, dense, top_k=3):
    """(``conversation`` must be fresh: its message count sets the IDF.)"""
    return retrieve_messages(
        conversation,
        QUESTION,
        settings=RetrievalSettings(max_items=5, dense=dense, dense_top_k=top_k),
    )


@needs_model
def test_meaning_finds_a_paraphrased_turn_that_words_miss(story, conversation, tenant_a):
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    assert story.pk not in {i.message.id for i in _retrieve(fresh(conversation), dense=False)}
    items = _retrieve(fresh(conversation), dense=True)
    assert items[0].message.id == story.pk


@needs_model
def test_messages_without_a_vector_are_found_by_words_only(story, conversation, member_a, tenant_a):
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    (late,) = add(conversation, member_a, "Which kind of collar suits our dog best?")
    add(conversation, member_a, "Anyway.")
    items = retrieve_messages(
        fresh(conversation),
        QUESTION,
        settings=RetrievalSettings(max_items=5, dense=True, dense_top_k=3),
    )
    ids = [i.message.id for i in items]
    assert late.pk in ids and story.pk in ids  # words find the new one, meaning the old one


@needs_model
def test_bounded_queries_whatever_the_length(
    story, conversation, member_a, tenant_a, django_assert_max_num_queries
):
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    small = fresh(conversation)
    # The words' search, the vectors, the rows, the replaced facts' statements, the turns.
    with django_assert_max_num_queries(5):
        assert _retrieve(small, dense=True)
    filler(conversation, member_a, rounds=10)
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    large = fresh(conversation)
    with django_assert_max_num_queries(5):
        assert _retrieve(large, dense=True, top_k=100)
    with django_assert_max_num_queries(4):  # lexical only: one fewer
        _retrieve(large, dense=False)


@needs_model
def test_the_vector_read_is_bounded_by_the_window(story, conversation, tenant_a):
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    seqs, vectors = stored_vectors(fresh(conversation), before_seq=20, window=5)
    assert list(seqs) == [19, 18, 17, 16, 15] and vectors.shape == (5, embeddings.DIMENSIONS)


@needs_model
def test_assembly_with_dense_on_off_and_unavailable(
    story, conversation, member_a, tenant_a, monkeypatch, django_assert_max_num_queries
):
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    (new,) = add(conversation, member_a, QUESTION)
    on = assemble_turn(conversation, new, policy=dense_policy(tenant_a))
    assert on.dense == "on" and OLD_FACT in on.prompt.system
    assert breakdown(on)["dense_retrieval"] == "on"
    off = assemble_turn(conversation, new, policy=dense_policy(tenant_a, dense=False, name="lex"))
    assert off.dense == "off" and OLD_FACT not in off.prompt.system
    # Without the model: silently lexical, and the breakdown says so.
    monkeypatch.setattr(embeddings, "available", lambda: False)
    policy = dense_policy(tenant_a, name="dense, no model")
    assert dense_status(policy) == "unavailable"
    unavailable = assemble_turn(conversation, new, policy=policy)
    assert unavailable.dense == "unavailable" and OLD_FACT not in unavailable.prompt.system
    assert breakdown(unavailable)["dense_retrieval"] == "unavailable"
    assert unavailable.prompt.system == off.prompt.system
    assert unavailable.prompt.messages == off.prompt.messages


@needs_model
def test_another_tenants_vectors_are_never_used(
    story, conversation, member_a, tenant_a, tenant_b, member_b
):
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    theirs = conversation_create(tenant=tenant_b, created_by=member_b)
    (foreign,) = add(theirs, member_b, "Our dog is a black labrador called Max.")
    # A vector that names tenant B but claims tenant A's conversation (a forged or corrupt
    # row) equal to the question itself: the read is filtered by tenant and never sees it.
    with tenant_scope(tenant_b):
        MessageEmbedding.objects.create(
            tenant=tenant_b,
            conversation_id=conversation.pk,
            message=foreign,
            seq=999,
            model=embeddings.MODEL_NAME,
            vector=embeddings.to_bytes(embeddings.embed([QUESTION])[0]),
        )
    seqs, _ = stored_vectors(fresh(conversation), before_seq=None)
    assert 999 not in set(seqs.tolist())
    items = _retrieve(fresh(conversation), dense=True, top_k=100)
    with tenant_scope(tenant_a):
        ours = set(conversation_messages(conversation))
    assert items and {i.message.id for i in items} <= ours
    with pytest.raises(ScopeError):
        list(MessageEmbedding.objects.all())


def conversation_messages(conversation):
    from chatplatform.models.conversations import Message

    return Message.objects.filter(conversation=conversation).values_list("id", flat=True)


@pytest.mark.postgres
@needs_model
def test_vector_read_uses_the_tenant_index_on_postgresql(story, conversation, tenant_a):
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    with connection.cursor() as cursor:  # a 31-row table: make the planner show the index
        cursor.execute("SET LOCAL enable_seqscan = off")
    with tenant_scope(tenant_a):
        plan = (
            MessageEmbedding.objects.filter(
                tenant_id=tenant_a.pk,
                conversation_id=conversation.pk,
                model=embeddings.MODEL_NAME,
                seq__lt=100,
            )
            .order_by("-seq")
            .values_list("seq", "vector")[:5000]
            .explain()
        )
    assert "embedding_unique_seq" in plan


def test_the_admin_edits_it_with_help(client, admin_a, tenant_a):
    policy = dense_policy(tenant_a, dense=False, name="editable")
    client.force_login(admin_a)
    page = client.get(f"/admin/chatplatform/contextpolicy/{policy.pk}/change/")
    assert page.status_code == 200
    body = page.content.decode()
    assert 'name="retrieval_dense"' in body and "requirements/embeddings.txt" in body


def test_presets_hybrid_stays_lexical_and_hybrid_plus_meaning_is_offered(presets):
    import importlib

    from django.apps import apps

    migration = importlib.import_module(
        "chatplatform.migrations.0005_contextpolicy_retrieval_dense"
    )
    migration.add_preset(apps, None)  # transactional tests may have flushed it: idempotent
    with all_tenants():
        hybrid = ContextPolicy.objects.get(tenant__isnull=True, name="Hybrid")
        plus = ContextPolicy.objects.get(tenant__isnull=True, name="Hybrid + meaning")
    assert not hybrid.retrieval_dense and dense_status(hybrid) == "off"
    assert plus.retrieval_dense and plus.strategy == "hybrid"
    assert plus.retrieval_max_items == hybrid.retrieval_max_items


@needs_model
def test_the_question_is_embedded_off_the_callers_thread(
    story, conversation, tenant_a, monkeypatch
):
    # The retriever starts the question's embedding before its full-text query and reads it
    # after: the forward pass runs on the embedding thread, and what it finds is the same.
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    threads = []
    embed = embeddings.embed_question

    def recording(text):
        threads.append(threading.current_thread().name)
        return embed(text)

    monkeypatch.setattr(embeddings, "embed_question", recording)
    current = fresh(conversation)
    inline = dense_scores(current, QUESTION, before_seq=None, top_k=5)
    future = question_soon(QUESTION)
    assert future is not None
    ahead = dense_scores(current, QUESTION, before_seq=None, top_k=5, question=future)
    assert ahead is not None and ahead == inline and story.seq in ahead
    assert threads[0] == threading.current_thread().name
    assert threads[1].startswith("question-embedding")
    items = _retrieve(fresh(conversation), dense=True)
    assert items[0].message.id == story.pk
    assert threads[2].startswith("question-embedding")


def test_a_question_that_fails_to_embed_leaves_retrieval_lexical(monkeypatch):
    monkeypatch.setattr(embeddings, "available", lambda: True)

    def broken(text):
        raise RuntimeError("boom")

    monkeypatch.setattr(embeddings, "embed_question", broken)
    future = question_soon(QUESTION)
    assert future is not None and future.result() is None
    monkeypatch.setattr(embeddings, "available", lambda: False)
    assert question_soon(QUESTION) is None


def test_a_forked_process_embeds_questions_on_a_thread_of_its_own(monkeypatch):
    # A child forked after the parent embedded a question has the parent's executor but not
    # its thread: work given to it would never run. Each process starts its own.
    from chats.retrieval import dense

    monkeypatch.setattr(embeddings, "available", lambda: True)
    monkeypatch.setattr(embeddings, "embed_question", lambda text: np.ones(embeddings.DIMENSIONS))
    parent = dense._question_executor()
    assert dense._question_executor() is parent
    monkeypatch.setattr(dense.os, "getpid", lambda: -1)
    child = dense._question_executor()
    assert child is not parent
    future = question_soon("a question")
    assert future is not None and future.result(timeout=10) is not None


def test_a_question_embedding_that_never_comes_leaves_retrieval_lexical(monkeypatch):
    from concurrent.futures import Future

    from chats.retrieval import dense

    monkeypatch.setattr(embeddings, "available", lambda: True)
    monkeypatch.setattr(dense, "QUESTION_WAIT_SECONDS", 0.05)
    stuck: Future = Future()  # never resolved, as a wedged model would leave it
    assert dense._awaited(stuck) is None
    done: Future = Future()
    done.set_result(np.ones(embeddings.DIMENSIONS))
    assert dense._awaited(done) is not None


@needs_model
def test_the_assembly_embeds_its_question_once_before_its_first_query(
    story, conversation, member_a, tenant_a, monkeypatch
):
    # The new message's embedding starts before the assembly reads anything, and retrieval
    # by meaning takes that embedding (not a second one of its own).
    from django.test.utils import CaptureQueriesContext

    from chats.retrieval import dense, retriever

    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    (new,) = add(conversation, member_a, QUESTION)
    started: list[int] = []
    start = dense.question_soon

    def counting(text):
        started.append(len(connection.queries))
        return start(text)

    monkeypatch.setattr(dense, "question_soon", counting)
    monkeypatch.setattr(retriever, "question_soon", counting)
    with CaptureQueriesContext(connection) as queries:
        turn = assemble_turn(conversation, new, policy=dense_policy(tenant_a))
    assert turn.dense == "on" and OLD_FACT in turn.prompt.system
    assert len(started) == 1
    history_read = next(
        i for i, q in enumerate(queries.captured_queries) if "chats_message" in q["sql"]
    )
    assert started[0] - queries.initial_queries <= history_read
