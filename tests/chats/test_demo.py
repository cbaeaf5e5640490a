"""The demo a fresh clone starts with (`make run`): log-ins in one box, new passwords on
demand, and a conversation whose first reply already shows trimming, retrieval, a summary and
the cost comparison."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from chatplatform.models import Tenant
from chatplatform.models.conversations import Conversation
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.assembly.preview import preview_next_turn
from chats.demo import CONVERSATION_TITLE, POLICY_NAME, SUGGESTED_QUESTION, demo_tenant
from chats.replies.turns import waiting_messages
from summaries.models import Summary

pytestmark = pytest.mark.django_db

PASSWORD = re.compile(r"(demo-\w+)\s+password: (\S+)")


def works(username: str, password: str) -> bool:
    return get_user_model().objects.get(username=username).check_password(password)


def setup_demo(capsys, *args: str) -> dict[str, str]:
    call_command("setup_demo", "--url", "http://127.0.0.1:8000/", *args)
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("┌") and out.rstrip().endswith("┘")
    assert "http://127.0.0.1:8000/" in out and "make demo-passwords" in out
    return {user: shown for user, shown in PASSWORD.findall(out) if shown != "(shown"}


def test_log_ins_are_shown_once_and_new_ones_on_demand(capsys):
    first = setup_demo(capsys)
    assert set(first) == {"demo-admin", "demo-member"}
    assert works("demo-member", first["demo-member"])
    assert setup_demo(capsys) == {}  # shown when created, never stored in clear
    reset = setup_demo(capsys, "--reset-passwords")
    assert set(reset) == {"demo-admin", "demo-member"} and reset != first
    assert works("demo-admin", reset["demo-admin"])
    assert not works("demo-admin", first["demo-admin"])
    with all_tenants():
        assert Tenant.objects.filter(slug="demo").count() == 1


def test_the_first_reply_shows_trimming_retrieval_a_summary_and_costs(capsys):
    setup_demo(capsys)
    tenant = demo_tenant()
    assert tenant is not None and tenant.active_policy is not None
    assert tenant.active_policy.name == POLICY_NAME
    assert tenant.active_policy.model_profile.price_input_per_mtok > 0
    with tenant_scope(tenant.pk):
        conversation = Conversation.objects.get(title=CONVERSATION_TITLE)
        assert Summary.objects.filter(conversation=conversation).exists()
        # Every stored question has its answer: the first question is the only one replied to.
        assert waiting_messages(tenant.pk, conversation.pk) == []
        turn = preview_next_turn(conversation, text=SUGGESTED_QUESTION)
    kinds = {item[0] for item in turn["included"]}
    assert {"summary", "retrieved", "message"} <= kinds
    assert turn["hypothetical_tokens"] > turn["budget"] > turn["prompt_tokens"]  # trimmed
    shown = sum(1 for item in turn["included"] if item[0] == "message")
    assert shown < conversation.last_seq
