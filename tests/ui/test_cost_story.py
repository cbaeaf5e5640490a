"""One cost story on every surface: the chat's meter, the admin's usage page and the REST
API (usage and a turn's record) lead with the bill against the whole history sent with
prompt caching, in the same words and numbers, say plainly when the turn cost more (never a
negative "saved"), put tokens second, and label the offline provider's cache figures as
simulated."""

from __future__ import annotations

import html
from decimal import Decimal

import pytest
from django.urls import reverse

from chatplatform.models import MembershipRole, ModelProfile
from chatplatform.models.conversations import TurnRecord
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from tests.api.conftest import API, key_client
from tests.ui.conftest import answered_turn

pytestmark = pytest.mark.django_db

EXTRA = (
    "This turn cost $0.0120, $0.0042 more than sending the whole history with prompt "
    "caching would have ($0.0078), because 1,500 tokens of its prompt were written to the "
    "provider's cache"
)
SAVED = (
    "This turn cost $0.0078; sending the whole history with prompt caching would have cost "
    "$0.0120: $0.0042 (35.0%) saved."
)


def billed_turn(conversation, user, *, cost: str, full_cost: str) -> TurnRecord:
    """A turn answered by the offline provider, then billed as given."""
    message = answered_turn(conversation, user, "How much did that cost? " + "words " * 40)
    with tenant_scope(conversation.tenant_id):
        TurnRecord.objects.filter(user_message=message).update(
            prompt_tokens_reported=1_600,
            cache_read_tokens=0,
            cache_write_tokens=1_500,
            cost_usd=Decimal(cost),
            full_history_cost_usd=Decimal(full_cost),
        )
        return TurnRecord.objects.select_related("model_profile").get(user_message=message)


def meter_of(client, conversation) -> dict:
    response = client.get(reverse("chats_ui:turn_meter", args=[conversation.pk]))
    return response.json()["meter"]


def test_a_dearer_turn_tells_the_same_story_on_the_meter_the_admin_and_the_api(
    client, member_a, admin_a, tenant_a, conversation_a
):
    record = billed_turn(conversation_a, member_a, cost="0.012", full_cost="0.0078")
    with all_tenants():
        assert record.model_profile is not None and record.model_profile.provider == "offline"

    client.force_login(member_a)
    cost = meter_of(client, conversation_a)["cost"]
    assert cost["outcome"] == "extra"
    assert cost["headline"].startswith(EXTRA)
    assert (cost["saved_usd"], cost["extra_usd"]) == ("0.000000", "0.004200")
    assert cost["tokens_line"].startswith("Its prompt took ")
    assert cost["simulated"] and "simulated" in cost["simulated_note"]

    client.force_login(admin_a)
    page = client.get(reverse("admin:chatplatform_tenant_usage", args=[tenant_a.pk]))
    body = html.unescape(page.content.decode())
    assert EXTRA.replace("This turn", "These 1 turns") not in body  # one turn reads as one
    assert EXTRA in body
    assert "$0.0042 more" in body and "negative" not in body and "$-" not in body
    assert "read from cache (simulated)" in body
    assert "Cache figures of turns answered by the offline provider are simulated" in body

    raw = api_key_create(tenant=tenant_a, name="admin", user=admin_a, role=MembershipRole.ADMIN)[1]
    api = key_client(raw)
    totals = api.get(f"{API}/usage/").json()["totals"]
    assert totals["savings_usd"] == "0.000000" and totals["extra_cost_usd"] == "0.004200"
    assert totals["summary"].startswith(EXTRA) and totals["cache_simulated"] is True
    member_api = key_client(api_key_create(tenant=tenant_a, name="member", user=member_a)[1])
    turn = member_api.get(
        f"{API}/conversations/{conversation_a.pk}/messages/{record.user_message_id}/context/"
    ).json()
    assert turn["cost"]["headline"] == cost["headline"]


def test_a_cheaper_turn_leads_with_the_bill_and_what_it_saved(
    client, member_a, admin_a, tenant_a, conversation_a
):
    billed_turn(conversation_a, member_a, cost="0.0078", full_cost="0.012")
    client.force_login(member_a)
    cost = meter_of(client, conversation_a)["cost"]
    assert cost["outcome"] == "saved" and cost["headline"] == SAVED
    client.force_login(admin_a)
    page = client.get(reverse("admin:chatplatform_tenant_usage", args=[tenant_a.pk]))
    body = html.unescape(page.content.decode())
    assert SAVED in body and "$0.0042 saved" in body


def test_real_providers_figures_are_not_called_simulated(
    client, member_a, tenant_a, conversation_a
):
    with all_tenants():
        claude = ModelProfile.objects.filter(tenant__isnull=True, provider="anthropic").first()
    record = billed_turn(conversation_a, member_a, cost="0.0078", full_cost="0.012")
    with tenant_scope(tenant_a):
        TurnRecord.objects.filter(pk=record.pk).update(model_profile=claude)
    client.force_login(member_a)
    cost = meter_of(client, conversation_a)["cost"]
    assert cost["simulated"] is False and cost["simulated_note"] == ""
