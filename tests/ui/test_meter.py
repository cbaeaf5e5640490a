"""The context meter's JSON: read from the stored per-turn record of the user's conversation."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chatplatform.models.conversations import TurnRecord
from chatplatform.tenancy.scoping import tenant_scope
from chats.ui.meter import meter_payload
from tests import factories
from tests.ui.conftest import answered_turn

pytestmark = pytest.mark.django_db


def test_meter_is_empty_before_the_first_turn(member_client, conversation_a):
    response = member_client.get(reverse("chats_ui:turn_meter", args=[conversation_a.pk]))
    assert response.status_code == 200
    assert response.json() == {"meter": None}


def test_meter_shows_the_split_of_the_window_and_the_savings(
    member_client, conversation_a, member_a
):
    for i in range(3):
        answered_turn(conversation_a, member_a, f"Message number {i} " + "words " * 50)
    last = answered_turn(conversation_a, member_a, "And the last one")
    url = reverse("chats_ui:turn_meter", args=[conversation_a.pk])
    meter = member_client.get(url).json()["meter"]
    assert meter["turn"]["user_message_id"] == last.pk
    names = [s["name"] for s in meter["segments"]]
    assert names[:6] == ["system", "instructions", "facts", "summaries", "retrieval", "history"]
    history = next(s for s in meter["segments"] if s["name"] == "history")
    assert history["tokens"] > 0 and history["items"] == 6
    assert meter["reply_reserve_tokens"] == 2048  # the Hybrid preset's reserve
    assert meter["window_tokens"] == meter["budget_tokens"] + 2048
    used = sum(s["tokens"] for s in meter["segments"])
    assert used + meter["free_tokens"] == meter["budget_tokens"]
    assert meter["hypothetical_tokens"] >= meter["prompt_tokens_estimated"]
    assert meter["saved_tokens"] == meter["hypothetical_tokens"] - meter["prompt_tokens_estimated"]
    assert meter["model"] == "Offline (built in)" and meter["strategy"] == "hybrid"


def test_meter_of_a_given_turn_by_user_or_assistant_message(
    member_client, conversation_a, member_a
):
    first = answered_turn(conversation_a, member_a, "First")
    answered_turn(conversation_a, member_a, "Second")
    url = reverse("chats_ui:turn_meter", args=[conversation_a.pk])
    by_user = member_client.get(url, {"message": first.pk}).json()["meter"]
    assert by_user["turn"]["user_message_id"] == first.pk
    reply_id = by_user["turn"]["assistant_message_id"]
    by_reply = member_client.get(url, {"message": reply_id}).json()["meter"]
    assert by_reply["turn"]["user_message_id"] == first.pk
    assert member_client.get(url, {"message": 999999}).json() == {"meter": None}


def test_excluded_items_are_grouped_by_reason(conversation_a, member_a):

    answered_turn(conversation_a, member_a, "Hello")
    with tenant_scope(conversation_a.tenant_id):
        record = TurnRecord.objects.select_related("policy", "model_profile").get()
    record.excluded = [
        ["history", 1, 30, "over_budget"],
        ["history", 2, None, "over_budget"],
        ["summary", 7, 12, "outside_window"],
        ["fact", 3, 5, "cap"],
    ]
    record.sections["truncated"] = [
        ["excerpt", 8, 870, 100],
        ["message", 4, 900, 300],
        ["excerpt", 10, 930, 99],
    ]
    meter = meter_payload(record)
    by_reason = {g["reason"]: g for g in meter["excluded"]}
    assert by_reason["over_budget"]["count"] == 2 and by_reason["over_budget"]["tokens"] == 30
    assert by_reason["over_budget"]["label"] == "did not fit the budget"
    assert by_reason["outside_window"]["kinds"] == {"summary": 1}
    assert meter["excluded"][0]["reason"] == "over_budget"  # most frequent first
    # the recalled replies shown as their head make one line, however many there are
    assert meter["truncated"] == [
        {"kind": "message", "id": 4, "original_tokens": 900, "kept_tokens": 300},
        {"kind": "2 recalled replies", "id": None, "original_tokens": 1800, "kept_tokens": 199},
    ]


def test_the_meter_compares_the_bill_with_the_whole_history_sent_with_caching(
    conversation_a, member_a
):
    from decimal import Decimal

    from chatplatform.models.conversations import TurnRecord
    from chatplatform.tenancy.scoping import tenant_scope

    answered_turn(conversation_a, member_a, "Hello")
    with tenant_scope(conversation_a.tenant_id):
        record = TurnRecord.objects.select_related("policy", "model_profile").get()
    record.prompt_tokens_reported, record.cache_read_tokens = 2000, 1500
    record.cost_usd, record.full_history_cost_usd = Decimal("0.0012"), Decimal("0.0031")
    meter = meter_payload(record)
    assert meter["cost_usd"] == "0.0012" and meter["full_history_cost_usd"] == "0.0031"
    assert meter["cache_read_percent"] == 75.0


def test_the_meter_says_a_message_went_whole_past_the_policys_limit(
    conversation_a, member_a, tenant_a
):
    from chatplatform.models.conversations import TurnRecord
    from chatplatform.tenancy.scoping import tenant_scope

    factories.make_policy(
        tenant_a,
        activate=True,
        strategy="sliding_window",
        max_context_tokens=4000,
        reserved_response_tokens=1000,
        system_budget=300,
        facts_budget=0,
        summaries_budget=0,
        retrieval_budget=0,
        oversized_message="whole",
    )
    message = answered_turn(conversation_a, member_a, " ".join(["paragraph"] * 4000))
    with tenant_scope(tenant_a):
        record = TurnRecord.objects.get(user_message=message)
    meter = meter_payload(record)
    assert meter["widened_by"] > 0
    assert not [t for t in meter["truncated"] if t["kind"] == "new_message"]
    assert record.prompt_tokens_estimated > 4000 - 1000


def test_standing_instructions_have_their_own_segment_with_their_items(
    member_client, conversation_a, tenant_a, member_a
):
    from memory.services import fact_save

    fact_save(tenant_a, member_a, "Always include version numbers", kind="instruction")
    fact_save(tenant_a, member_a, "I prefer minimal dependencies", kind="preference")
    fact_save(tenant_a, member_a, "Lives in Lisbon")
    answered_turn(conversation_a, member_a, "Which library should I use?")
    url = reverse("chats_ui:turn_meter", args=[conversation_a.pk])
    meter = member_client.get(url).json()["meter"]
    segments = {s["name"]: s for s in meter["segments"]}
    instructions = segments["instructions"]
    assert instructions["label"] == "Instructions"
    assert instructions["items"] == 2 and instructions["tokens"] > 0
    assert instructions["budget"] > 0
    assert segments["facts"]["items"] == 1
