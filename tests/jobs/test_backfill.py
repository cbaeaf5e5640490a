"""Token-count backfill: batched by id, bounded queries, resumable, idempotent, recounts
when the policy's counter changes, keeps history_tokens consistent."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db.models import Count, Sum

from chatplatform.core.tokens import get_counter
from chatplatform.models import ModelProfile
from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.token_counts.backfill import backfill_tenant, backfill_token_counts
from chats.token_counts.targets import targets_for
from summaries.models import TokenBackfillState
from tests.factories import make_conversation
from tests.summaries.helpers import add_messages, db_snapshot, make_policy

pytestmark = pytest.mark.django_db

O200K = get_counter("o200k_base")
CL100K = get_counter("cl100k_base")


def legacy(conversation, n, user=None, *, counted=False, **kwargs):
    return add_messages(conversation, n, user=user, counted=counted, **kwargs)


def expected_history(conversation, counter):
    """What history_tokens must be: every counted message's count plus its overhead."""
    with tenant_scope(conversation.tenant_id):
        agg = Message.objects.filter(
            conversation_id=conversation.pk, token_count__isnull=False
        ).aggregate(total=Sum("token_count"), n=Count("pk"))
    return (agg["total"] or 0) + agg["n"] * counter.message_overhead


def history(conversation):
    with tenant_scope(conversation.tenant_id):
        return Conversation.objects.get(pk=conversation.pk).history_tokens


def uncounted(tenant):
    with tenant_scope(tenant):
        return Message.objects.filter(token_count__isnull=True).count()


@pytest.fixture
def data(tenant_a, member_a):
    make_policy(tenant_a)
    conversations = [make_conversation(tenant_a, member_a) for _ in range(3)]
    for conversation in conversations:
        add_messages(conversation, 5, user=member_a)  # counted already
        legacy(conversation, 40, user=member_a)
    return conversations


def test_counts_legacy_rows_and_keeps_history_tokens_consistent(tenant_a, data):
    stats, resume = backfill_token_counts(tenant_id=tenant_a.pk, batch_size=25)
    assert resume is None and stats.complete
    assert stats.updated == 120 and uncounted(tenant_a) == 0
    with tenant_scope(tenant_a):
        for pk, content, count, name in Message.objects.values_list(
            "pk", "content", "token_count", "token_counter"
        ):
            assert (count, name) == (O200K.count(content), "o200k_base"), pk
    for conversation in data:
        assert history(conversation) == expected_history(conversation, O200K)


def test_second_run_updates_nothing(tenant_a, data):
    backfill_token_counts(tenant_id=tenant_a.pk, batch_size=25)
    before = db_snapshot()
    stats, _ = backfill_token_counts(tenant_id=tenant_a.pk, batch_size=25)
    assert stats.updated == 0
    assert db_snapshot() == before


def test_queries_are_bounded_per_batch(tenant_a, data, django_assert_max_num_queries):
    # per batch: read, update messages, lock + update conversations, savepoints;
    # per run: policy/targets, state, newest id. Independent of the batch size.
    with django_assert_max_num_queries(16 + 6 * 5) as small_batches:
        stats = backfill_tenant(tenant_a, batch_size=30)
    assert stats.batches == 4
    legacy(data[0], 120)
    with django_assert_max_num_queries(16 + 6 * 2) as big_batches:
        stats = backfill_tenant(tenant_a, batch_size=1000)
    assert stats.batches == 1 and stats.updated == 120
    assert len(big_batches.captured_queries) < len(small_batches.captured_queries)


def test_stopping_at_the_deadline_and_resuming(tenant_a, data, monkeypatch):
    from chats.token_counts import batches

    clock = {"now": 0.0}

    class FakeTime:
        @staticmethod
        def monotonic():
            return clock["now"]

    def tick(scanned, updated):
        clock["now"] += 6  # each batch "takes" 6 s

    monkeypatch.setattr(batches, "time", FakeTime)
    stats = backfill_tenant(tenant_a, batch_size=10, deadline=10, on_batch=tick)
    assert not stats.complete and stats.batches == 2 and stats.updated == 20
    assert uncounted(tenant_a) == 100
    stats = backfill_tenant(tenant_a, batch_size=10, deadline=10_000, on_batch=tick)
    assert stats.complete and stats.updated == 100 and uncounted(tenant_a) == 0
    for conversation in data:
        assert history(conversation) == expected_history(conversation, O200K)


def test_interrupted_run_resumes_without_double_counting(tenant_a, data, monkeypatch):
    from chats.token_counts import batches

    real_apply = batches.apply_updates
    state = {"batches": 0}

    def flaky_apply(tenant_id, updates):
        state["batches"] += 1
        if state["batches"] == 3:
            raise RuntimeError("worker killed")
        return real_apply(tenant_id, updates)

    monkeypatch.setattr(batches, "apply_updates", flaky_apply)
    with pytest.raises(RuntimeError):
        backfill_tenant(tenant_a, batch_size=20)
    assert 0 < uncounted(tenant_a) < 120  # two batches committed, the third rolled back
    monkeypatch.setattr(batches, "apply_updates", real_apply)
    stats = backfill_tenant(tenant_a, batch_size=20)
    assert stats.updated == 120 - 40
    assert uncounted(tenant_a) == 0
    for conversation in data:
        assert history(conversation) == expected_history(conversation, O200K)


def test_recounts_when_the_policy_counter_changes(tenant_a, data):
    backfill_tenant(tenant_a, batch_size=50)
    with tenant_scope(tenant_a):
        profile = ModelProfile.objects.create(
            tenant=tenant_a,
            name="cl100k model",
            provider="offline",
            model="offline",
            context_window=100_000,
            max_output_tokens=4096,
            tokenizer="cl100k_base",
        )
    make_policy(tenant_a, model_profile=profile)
    assert targets_for(tenant_a).default.name == "cl100k_base"
    stats = backfill_tenant(tenant_a, batch_size=50)
    assert stats.updated == 135  # every message, the 15 counted at save time too
    with tenant_scope(tenant_a):
        assert set(Message.objects.values_list("token_counter", flat=True)) == {"cl100k_base"}
        state = TokenBackfillState.objects.get()
    assert state.signature == "cl100k_base" and state.verified_upto_id > 0
    for conversation in data:
        assert history(conversation) == expected_history(conversation, CL100K)
    assert backfill_tenant(tenant_a, batch_size=50).updated == 0


def test_conversation_policy_overrides_get_their_own_counter(tenant_a, member_a, data):
    with tenant_scope(tenant_a):
        profile = ModelProfile.objects.create(
            tenant=tenant_a,
            name="cl100k model",
            provider="offline",
            model="offline",
            context_window=100_000,
            max_output_tokens=4096,
            tokenizer="cl100k_base",
        )
    tenant_policy = make_policy(tenant_a, name="tenant default")
    special = make_policy(tenant_a, model_profile=profile, name="special")
    tenant_a.active_policy = tenant_policy
    tenant_a.save(update_fields=["active_policy"])
    with tenant_scope(tenant_a):
        Conversation.objects.filter(pk=data[0].pk).update(policy=special)
    backfill_tenant(tenant_a, batch_size=30)
    with tenant_scope(tenant_a):
        names = dict(Message.objects.values_list("conversation_id", "token_counter").distinct())
        counters = set(
            Message.objects.filter(conversation=data[0]).values_list("token_counter", flat=True)
        )
    assert counters == {"cl100k_base"}  # the 5 counted with o200k were recounted too
    assert names[data[1].pk] == "o200k_base"
    assert history(data[0]) == expected_history(data[0], CL100K)
    assert backfill_tenant(tenant_a, batch_size=30).updated == 0


def test_streaming_rows_are_left_to_message_finish(tenant_a, data):
    with tenant_scope(tenant_a):
        streaming = Message.objects.filter(token_count__isnull=True).first()
        assert streaming is not None
        Message.objects.filter(pk=streaming.pk).update(status="streaming")
    backfill_tenant(tenant_a)
    streaming.refresh_from_db()
    assert streaming.token_count is None


def test_only_the_given_tenant_is_touched(tenant_a, tenant_b, member_b, data):
    make_policy(tenant_b)
    theirs = make_conversation(tenant_b, member_b)
    legacy(theirs, 30, member_b)
    backfill_token_counts(tenant_id=tenant_a.pk)
    assert uncounted(tenant_a) == 0 and uncounted(tenant_b) == 30
    assert history(theirs) == 0
    backfill_token_counts()
    assert uncounted(tenant_b) == 0


def test_command_with_progress_and_idempotent(tenant_a, data):
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "backfill_token_counts",
        "--tenant",
        str(tenant_a.pk),
        "--batch-size",
        "25",
        stdout=out,
        stderr=err,
    )
    assert "updated 120" in out.getvalue()
    assert "tenant" in err.getvalue()  # the tqdm bar
    out = io.StringIO()
    call_command("backfill_token_counts", "--batch-size", "25", "--no-progress", stdout=out)
    assert "updated 0" in out.getvalue()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_parallel_writers_on_postgresql(tenant_a, member_a):
    make_policy(tenant_a)
    conversations = [make_conversation(tenant_a, member_a) for _ in range(6)]
    for conversation in conversations:
        legacy(conversation, 250, member_a)
    stats = backfill_tenant(tenant_a, batch_size=100, workers=3)
    assert stats.updated == 1500 and stats.complete
    assert uncounted(tenant_a) == 0
    for conversation in conversations:
        assert history(conversation) == expected_history(conversation, O200K)
    with all_tenants():
        assert TokenBackfillState.objects.get(tenant=tenant_a).verified_upto_id > 0
    assert backfill_tenant(tenant_a, batch_size=100, workers=3).updated == 0
