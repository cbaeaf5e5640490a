"""What the provider's own context management did is shown: the meter tells of a compaction
and of cleared tool uses, the summaries page marks the provider's compaction, and a reply cut
short at a limit says so in the conversation."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chatplatform.models.conversations import Message, TurnRecord
from chatplatform.tenancy.scoping import tenant_scope
from chats.ui.meter import meter_payload
from tests.factories import summary
from tests.ui.conftest import answered_turn

pytestmark = pytest.mark.django_db


def test_the_meter_tells_what_the_provider_compacted_and_cleared(conversation_a, member_a):
    answered_turn(conversation_a, member_a, "Hello")
    with tenant_scope(conversation_a.tenant_id):
        record = TurnRecord.objects.select_related("policy", "model_profile").get()
    record.strategy = "server_compaction"
    record.provider_context = {
        "compaction": {
            "summary_id": 9,
            "first_seq": 1,
            "last_seq": 41,
            "tokens": 812,
            "usage": {"input_tokens": 84_000, "output_tokens": 800},
            "cost_usd": "0.264000",
        },
        "applied_edits": [
            {
                "type": "clear_tool_uses_20250919",
                "cleared_tool_uses": 2,
                "cleared_input_tokens": 1_500,
            }
        ],
    }
    meter = meter_payload(record)
    compaction, cleared = meter["provider_context"]
    assert "compacted messages #1 to #41 into a 812-token summary" in compaction
    assert "84,000 tokens read" in compaction and "$0.264000" in compaction
    assert cleared == "The provider cleared 2 old tool use(s) from the prompt (1,500 tokens)."
    labels = {s["name"]: s["label"] for s in meter["segments"]}
    assert labels["summaries"] == "Compaction (by the provider)"


def test_the_summaries_page_marks_the_providers_compaction(member_client, conversation_a, member_a):
    answered_turn(conversation_a, member_a, "First")
    summary(conversation_a, 1, 2, "The user said first.", kind="compaction")
    response = member_client.get(
        reverse("chats_ui:conversation_summaries", args=[conversation_a.pk])
    )
    page = response.content.decode()
    assert "Compaction summary" in page
    assert "Written by the model provider (server compaction)" in page


def test_a_reply_cut_short_at_a_limit_says_so(member_client, conversation_a, member_a):
    answered_turn(conversation_a, member_a, "Tell me everything")
    with tenant_scope(conversation_a.tenant_id):
        Message.objects.filter(role="assistant").update(
            status="incomplete",
            error_code="max_tokens",
            error_message="The reply reached the length limit the policy reserves for it.",
        )
    response = member_client.get(reverse("chats_ui:conversation_detail", args=[conversation_a.pk]))
    page = response.content.decode()
    assert "cut short" in page
    assert "reached the length limit" in page
