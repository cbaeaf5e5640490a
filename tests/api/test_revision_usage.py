"""A regenerated or edited reply does not erase what the reply it replaced was billed: every
billed turn stays in the tenant's usage (the admin's reports, the per-policy chart, the REST
usage), while the turn record of the message (REST) and the context meter show the newest turn
only. A failed attempt's record stays only when the provider billed it."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from chatplatform.core.llm.base import Usage
from chatplatform.models import ModelProfile
from chatplatform.models.conversations import Status, TurnRecord
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies.intake import user_message_accept
from chats.replies.turns import turn_finish, turn_prepare
from chats.services.revisions import reply_regenerate, user_message_edit
from console.reports import policy_usage_report, usage_report
from tests.api.conftest import API
from tests.factories import make_policy, offline_profile

pytestmark = pytest.mark.django_db

#: The prompt each turn reports; each turn's reply is longer than the one before.
PROMPT_TOKENS = 1_000


@pytest.fixture
def priced_policy(tenant_a):
    """The tenant's active policy on the offline model with prices: $2 in, $10 out per Mtok."""
    base = offline_profile()
    with tenant_scope(tenant_a):
        profile = ModelProfile.objects.create(
            tenant=tenant_a,
            name="Offline, priced",
            provider="offline",
            model=base.model,
            context_window=base.context_window,
            max_output_tokens=base.max_output_tokens,
            tokenizer=base.tokenizer,
            price_input_per_mtok=Decimal(2),
            price_output_per_mtok=Decimal(10),
        )
    return make_policy(tenant_a, activate=True, model_profile=profile)


def cost_of(output_tokens: int) -> Decimal:
    return (PROMPT_TOKENS * Decimal(2) + output_tokens * Decimal(10)) / 1_000_000


def answer(conversation, question, output_tokens: int | None, status=Status.COMPLETE) -> int:
    """One attempt at the reply to ``question``, as the reply pipeline makes it; ``None``: the
    provider reported no usage (it failed before answering)."""
    prepared = turn_prepare(conversation.tenant_id, question.pk)
    assert prepared is not None
    usage = None if output_tokens is None else Usage(PROMPT_TOKENS, output_tokens)
    turn_finish(prepared, content=f"{output_tokens} tokens", status=status, usage=usage)
    return prepared.assistant_message_id


def records(conversation) -> list[TurnRecord]:
    with tenant_scope(conversation.tenant_id):
        return list(TurnRecord.objects.filter(conversation_id=conversation.pk).order_by("pk"))


def test_regenerated_and_edited_replies_stay_in_the_usage_and_only_the_newest_is_shown(
    priced_policy, conversation_a, member_a, admin_a, tenant_a, admin_client_a, client_a, client
):
    conversation = conversation_a
    question, _ = user_message_accept(
        conversation=conversation, user=member_a, content="What is the capital of France?"
    )
    reply_id = answer(conversation, question, 100)
    reply_regenerate(conversation=conversation, user=member_a, reply_id=reply_id)
    assert answer(conversation, question, 200) == reply_id  # the reply row is reused
    user_message_edit(
        conversation=conversation, user=member_a, message_id=question.pk, content="And Spain?"
    )
    assert answer(conversation, question, 300) == reply_id

    first, second, newest = records(conversation)
    assert first.superseded_at is not None and second.superseded_at is not None
    assert newest.superseded_at is None and newest.completion_tokens == 300
    billed = cost_of(100) + cost_of(200) + cost_of(300)
    assert [r.cost_usd for r in (first, second, newest)] == [
        cost_of(100),
        cost_of(200),
        cost_of(300),
    ]

    # The tenant's usage counts all three billed turns: the admin's report and its policy chart
    report = usage_report(tenant_a)
    assert report.totals.turns == 3 and report.totals.cost_usd == billed
    assert report.totals.completion_tokens == 600
    [by_policy] = report.policies
    assert by_policy.usage.turns == 3 and by_policy.usage.cost_usd == billed
    charted = policy_usage_report(priced_policy, [tenant_a.pk])
    assert charted.totals.turns == 3 and charted.totals.cost_usd == billed
    # ... and the REST usage.
    body = admin_client_a.get(f"{API}/usage/").json()
    [row] = body["rows"]
    assert row["turns"] == 3 and Decimal(row["cost_usd"]) == billed
    assert row["completion_tokens"] == 600 and row["prompt_tokens"] == 3 * PROMPT_TOKENS

    # The message's turn record is the newest turn's.
    url = f"{API}/conversations/{conversation.pk}/messages/{question.pk}/context/"
    record = client_a.get(url).json()
    assert record["completion_tokens"] == 300 and Decimal(record["cost_usd"]) == cost_of(300)

    # So is the meter, asked by the user message, the reply, or for the newest turn.
    client.force_login(member_a)
    meter_url = f"/chats/{conversation.pk}/meter/"
    for query in (f"?message={question.pk}", f"?message={reply_id}", ""):
        meter = client.get(meter_url + query).json()["meter"]
        assert meter["completion_tokens"] == 300, query
        assert meter["turn"]["assistant_message_id"] == reply_id

    # The tenant admin's list of turn records tells the superseded ones apart.
    client.force_login(admin_a)
    changelist = reverse("admin:chatplatform_turnrecord_changelist")
    page = client.get(changelist, {"superseded_at__isempty": "0"})
    assert page.status_code == 200 and page.context["cl"].result_count == 2


def test_a_failed_attempt_stays_in_the_usage_only_when_the_provider_billed_it(
    priced_policy, conversation_a, member_a, tenant_a
):
    conversation = conversation_a
    question, _ = user_message_accept(conversation=conversation, user=member_a, content="Hello")
    answer(conversation, question, None, status=Status.FAILED)  # nothing reached the provider
    answer(conversation, question, 50, status=Status.FAILED)  # billed, then cut off
    answer(conversation, question, 70)

    # The unbilled attempt's record went; the billed one is kept, superseded.
    kept, newest = records(conversation)
    assert kept.superseded_at is not None and kept.cost_usd == cost_of(50)
    assert newest.superseded_at is None and newest.completion_tokens == 70
    totals = usage_report(tenant_a).totals
    assert totals.turns == 2 and totals.cost_usd == cost_of(50) + cost_of(70)
