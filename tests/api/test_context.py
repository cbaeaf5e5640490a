"""Context: the preview of the next turn and the stored record of past turns."""

from __future__ import annotations

import pytest

from chatplatform.models import ContextPolicy, ModelProfile
from chatplatform.models.conversations import Message, MessageRole, TurnRecord
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.services import message_create
from tests.api.conftest import API, error_of
from tests.api.helpers import add_message, add_turn

pytestmark = pytest.mark.django_db


def preview_url(conversation) -> str:
    return f"{API}/conversations/{conversation.pk}/context/"


def test_preview_breaks_the_next_turn_down_by_section(client_a, conversation_a, member_a):
    add_message(conversation_a, member_a, "We talked about the mountains.")
    response = client_a.get(preview_url(conversation_a), {"message": "And the sea?"})
    assert response.status_code == 200
    body = response.json()
    names = [s["name"] for s in body["sections"]]
    assert {"system", "history", "new_message"} <= set(names)
    assert body["prompt_tokens"] <= body["budget"]
    assert body["policy"]["name"] == "Hybrid"
    assert any(kind == "message" for kind, *_ in body["included"]) or body["included"]
    assert body["hypothetical_tokens"] > 0


def test_preview_under_a_preset_and_not_another_tenants_policy(client_a, conversation_a, tenant_b):
    with all_tenants():
        preset = ContextPolicy.objects.get(tenant__isnull=True, name="Sliding window")
        profile = ModelProfile.objects.filter(tenant__isnull=True).first()
    assert profile is not None
    body = client_a.get(preview_url(conversation_a), {"policy": preset.pk}).json()
    assert body["policy"] == {"id": preset.pk, "name": preset.name}
    assert body["strategy"] == "sliding_window"
    with tenant_scope(tenant_b):
        theirs = ContextPolicy.objects.create(
            tenant=tenant_b, name="B's", model_profile=profile, max_context_tokens=30000
        )
    for policy_id in (theirs.pk, 10**9):
        response = client_a.get(preview_url(conversation_a), {"policy": policy_id})
        assert list(error_of(response, 400, "invalid")["fields"]) == ["policy"]
    error_of(client_a.get(preview_url(conversation_a), {"policy": "x"}), 400, "invalid")


def test_preview_of_a_policy_that_does_not_fit_is_a_clear_400(client_a, conversation_a, tenant_a):
    with all_tenants():
        small = ModelProfile.objects.create(
            tenant=tenant_a,
            name="tiny",
            provider="offline",
            model="tiny",
            context_window=1000,
            max_output_tokens=100,
        )
    with tenant_scope(tenant_a):
        policy = ContextPolicy(
            tenant=tenant_a,
            name="Too big",
            model_profile=small,
            max_context_tokens=900,
            reserved_response_tokens=100,
            system_budget=790,
            instructions_budget=0,
            facts_budget=0,
            summaries_budget=0,
            retrieval_budget=0,
        )
        ContextPolicy.objects.bulk_create([policy])
        policy = ContextPolicy.objects.get(name="Too big")
    with all_tenants():
        # The model's window shrank after the policy was written: the reserve alone fills it.
        ModelProfile.objects.filter(pk=small.pk).update(context_window=100, max_output_tokens=50)
    response = client_a.get(preview_url(conversation_a), {"policy": policy.pk})
    error = error_of(response, 400, "policy_invalid")
    # Turns clamp the policy to the model's window; a window this small fits no prompt at all.
    assert "100-token limit" in error["message"]
    assert "choose a model with a larger context window" in error["message"]
    assert "at most -" not in error["message"]


def test_turn_record_of_a_past_turn(client_a, conversation_a, member_a):
    record = add_turn(conversation_a, member_a, estimated=321, reported=300)
    url = f"{API}/conversations/{conversation_a.pk}/messages/{record.user_message_id}/context/"
    body = client_a.get(url).json()
    assert body["id"] == record.pk and body["user_message"] == record.user_message_id
    assert body["prompt_tokens_estimated"] == 321 and body["prompt_tokens_reported"] == 300
    assert body["strategy"] == "hybrid" and body["cost_usd"] == "0.001000"
    assert body["provider_context"] == {}  # what the provider's own context management did
    plain = add_message(conversation_a, member_a, "never answered")
    missing = f"{API}/conversations/{conversation_a.pk}/messages/{plain.pk}/context/"
    error_of(client_a.get(missing), 404, "not_found")


def answered(record: TurnRecord, text: str = "the answer") -> Message:
    """Give ``record``'s turn its reply, as the reply pipeline does at the turn's end."""
    conversation = record.conversation
    assert conversation is not None
    reply, _ = message_create(
        conversation=conversation,
        role=MessageRole.ASSISTANT,
        content=text,
        answers=record.user_message,
        validate=False,
    )
    with tenant_scope(conversation.tenant_id):
        TurnRecord.objects.filter(pk=record.pk).update(assistant_message=reply)
    return reply


def test_the_replys_id_finds_the_same_turn_record(client_a, conversation_a, member_a):
    record = add_turn(conversation_a, member_a, estimated=321)
    reply = answered(record)
    messages = f"{API}/conversations/{conversation_a.pk}/messages"
    by_question = client_a.get(f"{messages}/{record.user_message_id}/context/")
    by_reply = client_a.get(f"{messages}/{reply.pk}/context/")
    assert by_question.status_code == by_reply.status_code == 200
    assert by_reply.json() == by_question.json()
    assert by_reply.json()["id"] == record.pk


def test_another_tenants_reply_finds_no_turn_record(
    client_a, conversation_a, conversation_b, member_b
):
    reply = answered(add_turn(conversation_b, member_b))
    for conversation in (conversation_b, conversation_a):
        url = f"{API}/conversations/{conversation.pk}/messages/{reply.pk}/context/"
        error_of(client_a.get(url), 404, "not_found")


def test_another_tenants_context_is_404(client_a, conversation_a, conversation_b, member_b):
    record = add_turn(conversation_b, member_b)
    error_of(client_a.get(preview_url(conversation_b)), 404, "not_found")
    theirs = f"{API}/conversations/{conversation_b.pk}/messages/{record.user_message_id}/context/"
    error_of(client_a.get(theirs), 404, "not_found")
    mixed = f"{API}/conversations/{conversation_a.pk}/messages/{record.user_message_id}/context/"
    error_of(client_a.get(mixed), 404, "not_found")
