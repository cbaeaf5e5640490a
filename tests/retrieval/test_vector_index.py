"""Retrieval by meaning over a whole conversation: the nearest-neighbour index kept by the
embedding job (``chats.retrieval.vector_index``, ``ann``), its incremental updates and
rebuilds, the per-process cache, the fallback to the exact scan without ``usearch``,
tenancy, and vectors dropped after the index was written.

Most tests shrink the thresholds (a "long" conversation of a few dozen messages, an exact
window of 5) so the real model embeds them in a second; one checks the real thresholds with
synthetic vectors."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from chatplatform.models.conversations import (
    Conversation,
    Message,
    MessageEmbedding,
    MessageVectorIndex,
)
from chatplatform.tenancy.scoping import tenant_scope
from chats.retrieval import (
    RetrievalSettings,
    ann,
    dense,
    embeddings,
    retrieve_messages,
    vector_index,
)
from chats.retrieval.dense import dense_scores, embed_conversation, missing_messages
from chats.services import conversation_create

from .conftest import add
from .test_dense import FILLER, OLD_FACT, QUESTION, filler, fresh

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        not embeddings.available(), reason="the embeddings requirements are not installed"
    ),
]
needs_ann = pytest.mark.skipif(not ann.available(), reason="the usearch package is not installed")

#: The exact scan's window in these tests: the old fact is far older than the newest 5.
WINDOW = 5


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch):
    monkeypatch.setattr(vector_index, "EXACT_LIMIT", WINDOW)
    monkeypatch.setattr(vector_index, "TAIL_REWRITE", 4)
    monkeypatch.setattr(vector_index, "REFRESH_SECONDS", 0.0)
    vector_index.cache.clear()
    yield
    vector_index.cache.clear()


@pytest.fixture
def story(conversation, member_a):
    (fact,) = add(conversation, member_a, OLD_FACT)
    filler(conversation, member_a)
    return fact


def near(conversation, *, top_k=3):
    """seq → cosine of the ``top_k`` nearest to the question, exact window of :data:`WINDOW`."""
    return dense_scores(fresh(conversation), QUESTION, before_seq=None, top_k=top_k, window=WINDOW)


def retrieved_ids(conversation):
    items = retrieve_messages(
        fresh(conversation),
        QUESTION,
        settings=RetrievalSettings(max_items=5, dense=True, dense_top_k=3, dense_window=WINDOW),
    )
    return {i.message.id for i in items}


def stored_index(conversation):
    with tenant_scope(conversation.tenant_id):
        return MessageVectorIndex.objects.filter(conversation=conversation).first()


@needs_ann
def test_the_job_builds_the_index_and_meaning_reaches_the_oldest_message(
    story, conversation, tenant_a
):
    result = embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    assert result.status == "done" and result.index == "built" and result.embedded == 31
    index = stored_index(conversation)
    assert index.size == 31 and index.engine == ann.ENGINE and index.version == 1
    assert story.seq == 1 and fresh(conversation).message_count > WINDOW
    assert story.seq in near(conversation)
    assert story.pk in retrieved_ids(conversation)
    # Idempotent: nothing new, nothing rewritten.
    again = embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    assert again.embedded == 0 and again.index == "current"
    assert stored_index(conversation).version == 1


def test_without_usearch_the_newest_vectors_are_scanned_exactly(
    story, conversation, tenant_a, monkeypatch
):
    monkeypatch.setitem(sys.modules, "usearch", None)  # the import fails
    monkeypatch.setattr(ann, "_installed", None)
    assert ann.available() is False and vector_index.enabled() is False
    result = embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    assert result.status == "done" and result.index == "unavailable"
    assert stored_index(conversation) is None
    found = near(conversation, top_k=10)
    assert found and set(found) <= set(range(27, 32))  # the newest 5 only
    with pytest.raises(ann.AnnUnavailable):
        ann.AnnIndex.new(embeddings.DIMENSIONS)


@needs_ann
def test_new_vectors_are_scanned_exactly_then_added_to_the_index(
    story, conversation, member_a, tenant_a
):
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    assert story.seq in near(conversation)  # loaded into this process's cache
    (dog,) = add(conversation, member_a, "Our puppy chewed the sofa cushion again today.")
    result = embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    assert result.index == "current"  # one new vector: the index is not rewritten
    first = stored_index(conversation)
    assert first.version == 1 and first.size == 31
    assert dog.seq in near(conversation, top_k=2)  # found in the exact tail
    add(conversation, member_a, *FILLER[:4])
    result = embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    assert result.index == "added"
    second = stored_index(conversation)
    assert second.version == 2 and second.size == 36 and second.covered_id > first.covered_id
    found = near(conversation, top_k=2)
    assert set(found) == {story.seq, dog.seq}  # the reloaded index holds both
    entry = vector_index.cache.get((tenant_a.pk, conversation.pk, embeddings.MODEL_NAME))
    assert entry is not None and entry.version == 2 and len(entry.index) == 36


@needs_ann
def test_dropped_vectors_and_deleted_messages_are_never_returned(
    story, conversation, member_a, tenant_a
):
    (second,) = add(conversation, member_a, "The shelter said our retriever puppy loves to swim.")
    filler(conversation, member_a, rounds=1)
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    assert {story.seq, second.seq} <= set(near(conversation))
    with tenant_scope(tenant_a):
        # An edit drops the message's vector (chats.services.revisions) ...
        MessageEmbedding.objects.filter(message=story).delete()
        # ... and a deleted message takes its vector with it.
        Message.objects.filter(pk=second.pk).delete()
    found = near(conversation, top_k=10)
    assert story.seq not in found and second.seq not in found
    assert story.pk not in retrieved_ids(conversation)
    assert stored_index(conversation).size == 42  # still in the graph: filtered when read


@needs_ann
def test_the_index_is_rebuilt_when_many_vectors_were_dropped(
    story, conversation, member_a, tenant_a
):
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    with tenant_scope(tenant_a):
        doomed = list(
            MessageEmbedding.objects.filter(conversation=conversation)
            .order_by("seq")
            .values_list("pk", flat=True)[1:10]
        )
        MessageEmbedding.objects.filter(pk__in=doomed).delete()
    result = embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    # The 9 messages lost their vectors (as an edit does): embedded again, then rebuilt.
    assert result.embedded == 9 and result.index == "built"
    index = stored_index(conversation)
    with tenant_scope(tenant_a):
        live = MessageEmbedding.objects.filter(conversation=conversation).count()
    assert index.size == live == 31 and index.version == 2
    assert story.seq in near(conversation)


@needs_ann
def test_an_index_never_returns_another_conversations_messages(
    story, conversation, member_a, tenant_a, tenant_b, member_b
):
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    mine = conversation_create(tenant=tenant_a, created_by=member_a)
    add(mine, member_a, "We talked about the garden.", *FILLER)
    embed_conversation(tenant_a.pk, mine.pk, check_policy=False)
    theirs = conversation_create(tenant=tenant_b, created_by=member_b)
    add(theirs, member_b, "Our dog is a black labrador called Max.", *FILLER)
    embed_conversation(tenant_b.pk, theirs.pk, check_policy=False)
    own_ids = {}
    for conv in (conversation, mine, theirs):
        with tenant_scope(conv.tenant_id):
            own_ids[conv.pk] = set(
                Message.objects.filter(conversation=conv).values_list("id", flat=True)
            )
    for conv in (conversation, mine, theirs):
        assert retrieved_ids(conv) <= own_ids[conv.pk]
    # A corrupt row: the other conversation's graph (whose keys name its vectors) under this
    # one. The candidates are checked against this conversation: its fact is never returned.
    source = stored_index(conversation)
    with tenant_scope(tenant_a):
        MessageVectorIndex.objects.filter(conversation=mine).update(
            data=source.data, covered_id=source.covered_id, version=99
        )
    found = near(mine, top_k=50)
    with tenant_scope(tenant_a):
        seqs = set(Message.objects.filter(conversation=mine).values_list("seq", flat=True))
    assert set(found) <= seqs and retrieved_ids(mine) <= own_ids[mine.pk]
    assert story.pk not in retrieved_ids(mine)


@needs_ann
def test_the_index_read_is_a_bounded_number_of_queries(
    story, conversation, tenant_a, django_assert_num_queries, monkeypatch
):
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    current = fresh(conversation)

    def nearest():
        return dense_scores(current, QUESTION, before_seq=None, top_k=3, window=WINDOW)

    with django_assert_num_queries(2):  # load: the stored index, the candidates and the tail
        assert story.seq in nearest()
    monkeypatch.setattr(vector_index, "REFRESH_SECONDS", 3600.0)
    with django_assert_num_queries(1):  # cached: the candidates and the tail, one statement
        assert story.seq in nearest()
    monkeypatch.setattr(vector_index, "REFRESH_SECONDS", 0.0)
    with django_assert_num_queries(2):  # due a check: the stored version, then as cached
        assert story.seq in nearest()


def test_the_cache_is_bounded_and_evicts_the_least_recently_used():
    class Sized:
        nbytes = 10

    cache = vector_index.IndexCache(max_bytes=25, max_entries=10)
    for n in range(3):
        cache.put((1, n, "m"), vector_index.Loaded(1, 0, Sized(), 0.0))  # type: ignore[arg-type]
    assert list(cache) == [(1, 1, "m"), (1, 2, "m")]
    cache.get((1, 1, "m"))
    cache.put((1, 3, "m"), vector_index.Loaded(1, 0, Sized(), 0.0))  # type: ignore[arg-type]
    assert list(cache) == [(1, 1, "m"), (1, 3, "m")]


@needs_ann
def test_the_adapter_round_trips_and_finds_the_nearest():
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((500, embeddings.DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = ann.AnnIndex.new(embeddings.DIMENSIONS)
    index.add(np.arange(1000, 1500), vectors)
    back = ann.AnnIndex.from_bytes(memoryview(index.to_bytes()))
    assert len(back) == 500 and back.nbytes > 0
    assert back.search(vectors[42], 3)[0] == 1042
    assert back.search(vectors[42], 0) == [] and ann.AnnIndex.new(4).search(np.ones(4), 3) == []
    with pytest.raises(Exception):  # noqa: B017 (whatever the library raises)
        ann.AnnIndex.from_bytes(b"not an index")


@needs_ann
def test_the_real_thresholds_find_a_message_older_than_the_newest_window(
    conversation, member_a, tenant_a, monkeypatch
):
    """6,000 messages with synthetic vectors; the one planted near the question at seq 10."""
    monkeypatch.setattr(vector_index, "EXACT_LIMIT", 5000)
    monkeypatch.setattr(vector_index, "TAIL_REWRITE", 1000)
    size, planted = 6000, 10
    with tenant_scope(tenant_a):
        Message.objects.bulk_create(
            [
                Message(
                    tenant=tenant_a,
                    conversation=conversation,
                    seq=seq,
                    role="user",
                    content=f"note {seq}",
                    token_count=3,
                    token_counter="words",
                )
                for seq in range(1, size + 1)
            ],
            batch_size=2000,
        )
        Conversation.objects.filter(pk=conversation.pk).update(last_seq=size, message_count=size)
        ids = dict(Message.objects.filter(conversation=conversation).values_list("seq", "id"))
        rng = np.random.default_rng(5)
        vectors = rng.standard_normal((size, embeddings.DIMENSIONS)).astype(np.float32)
        vectors[planted - 1] = embeddings.embed([QUESTION])[0] * 20 + vectors[planted - 1] * 0.1
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        MessageEmbedding.objects.bulk_create(
            [
                MessageEmbedding(
                    tenant=tenant_a,
                    conversation=conversation,
                    message_id=ids[seq],
                    seq=seq,
                    model=embeddings.MODEL_NAME,
                    vector=embeddings.to_bytes(vectors[seq - 1]),
                )
                for seq in range(1, size + 1)
            ],
            batch_size=2000,
        )
    exact = dense_scores(fresh(conversation), QUESTION, before_seq=None, top_k=5)
    assert exact is not None and planted not in exact  # no index yet: the newest 5,000
    result = embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    assert result.index == "built" and stored_index(conversation).size == size
    found = dense_scores(fresh(conversation), QUESTION, before_seq=None, top_k=5)
    assert found is not None and max(found, key=found.__getitem__) == planted


def test_the_jobs_embed_every_message_however_old(story, conversation, tenant_a, monkeypatch):
    monkeypatch.setattr(dense, "WINDOW", WINDOW)  # the read window no longer bounds the jobs
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    with tenant_scope(tenant_a):
        MessageEmbedding.objects.filter(message=story).delete()
    (row,) = missing_messages(tenant_a.pk, conversation.pk, limit=5)
    assert row["id"] == story.pk and story.seq == 1
    assert embed_conversation(tenant_a.pk, conversation.pk, check_policy=False).embedded == 1
