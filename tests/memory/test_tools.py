"""The model's fact tools: executed for the turn's user, schema-checked, JSON results."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from chatplatform.core.llm.base import ChatRequest, Provider, RequestMessage, ToolCall
from chatplatform.core.llm.tool_loop import stream_with_tools
from chatplatform.core.llm.tools import FACT_TOOLS, SAVE_USER_FACT
from chatplatform.core.memory.kinds import MEMORY_KINDS
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import message_create
from memory.models import UserFact
from memory.selectors import facts_list
from memory.services import fact_save
from memory.tools import execute_tool, tool_executor
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db


def run(name, data, tenant, user, message_id=None):
    result = execute_tool(name, data, tenant_id=tenant.pk, user_id=user.pk, message_id=message_id)
    json.dumps(result)  # JSON-able
    return result


def test_tool_names_match_the_provider_definitions():
    from memory.tools import TOOL_NAMES

    assert set(TOOL_NAMES) == {t.name for t in FACT_TOOLS}


def test_save_and_get(tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a)
    message, _ = message_create(
        conversation=conversation, role="user", content="I moved to Porto", author=member_a
    )
    saved = run("save_user_fact", {"text": "Lives in Kyiv", "key": "city"}, tenant_a, member_a)
    assert saved["ok"] and saved["saved"] and saved["fact"]["key"] == "city"
    replaced = run(
        "save_user_fact",
        {"text": "Lives in Porto", "key": "city"},
        tenant_a,
        member_a,
        message.pk,
    )
    assert replaced["replaced"]["text"] == "Lives in Kyiv"
    with tenant_scope(tenant_a):
        fact = UserFact.objects.get(pk=replaced["fact"]["id"])
    assert fact.source == "tool" and fact.source_message_id == message.pk
    got = run("get_user_facts", {}, tenant_a, member_a)
    assert got == {
        "ok": True,
        "count": 1,
        "facts": [
            {
                "id": fact.pk,
                "kind": "fact",
                "text": "Lives in Porto",
                "key": "city",
                "shareable": False,
                "saved_at": fact.created_at.isoformat(),
            }
        ],
    }


@pytest.mark.parametrize(
    ("name", "data", "code"),
    [
        ("delete_everything", {}, "unknown_tool"),
        ("save_user_fact", {}, "invalid_input"),
        ("save_user_fact", {"text": 5}, "invalid_input"),
        ("save_user_fact", {"text": "x", "user_id": 1}, "invalid_input"),
        ("save_user_fact", {"text": "x" * 501}, "too_large"),
        ("save_user_fact", {"text": "   "}, "empty"),
        ("save_user_fact", {"text": "ok", "key": "k" * 65}, "invalid_key"),
        ("save_user_fact", {"text": "Always be brief", "kind": "rule"}, "invalid_kind"),
        ("save_user_fact", {"text": "Always be brief", "kind": 3}, "invalid_kind"),
        ("get_user_facts", {"user_id": 2}, "invalid_input"),
        ("get_user_facts", [], "invalid_input"),
    ],
)
def test_bad_calls_are_errors(tenant_a, member_a, name, data, code):
    result = run(name, data, tenant_a, member_a)
    assert result["ok"] is False and result["error"] == code
    assert facts_list(tenant_a, member_a).total == 0


def test_save_a_standing_instruction_in_the_users_words(tenant_a, member_a):
    schema = SAVE_USER_FACT.input_schema["properties"]["kind"]
    assert schema["enum"] == list(MEMORY_KINDS) and schema["default"] == "fact"
    assert "own words" in SAVE_USER_FACT.description
    rule = run(
        "save_user_fact",
        {"text": "From now on, answer in Spanish", "kind": "instruction", "key": "lang"},
        tenant_a,
        member_a,
    )
    assert rule["ok"] and rule["fact"]["kind"] == "instruction" and rule["fact"]["key"] is None
    liked = run(
        "save_user_fact",
        {"text": "I prefer minimal dependencies", "kind": "preference"},
        tenant_a,
        member_a,
    )
    assert liked["fact"]["kind"] == "preference"
    fact = run("save_user_fact", {"text": "Lives in Lisbon"}, tenant_a, member_a)
    assert fact["fact"]["kind"] == "fact"
    got = run("get_user_facts", {}, tenant_a, member_a)
    assert {f["text"]: f["kind"] for f in got["facts"]} == {
        "From now on, answer in Spanish": "instruction",
        "I prefer minimal dependencies": "preference",
        "Lives in Lisbon": "fact",
    }
    later = run(
        "save_user_fact",
        {"text": "From now on, answer in French", "kind": "instruction"},
        tenant_a,
        member_a,
    )
    assert later["replaced"]["text"] == "From now on, answer in Spanish"


def test_tools_never_reach_another_user_or_tenant(tenant_a, tenant_b, member_a, member_b, admin_a):
    fact_save(tenant_b, member_b, "SECRET OF TENANT B")
    fact_save(tenant_a, admin_a, "SECRET OF ANOTHER USER")
    got = run("get_user_facts", {}, tenant_a, member_a)
    assert got["count"] == 0
    other_conversation = make_conversation(tenant_b, member_b)
    foreign, _ = message_create(
        conversation=other_conversation, role="user", content="hi", author=member_b
    )
    saved = run("save_user_fact", {"text": "Mine"}, tenant_a, member_a, foreign.pk)
    with tenant_scope(tenant_a):
        assert UserFact.objects.get(pk=saved["fact"]["id"]).source_message_id is None
    assert run("save_user_fact", {"text": "x"}, tenant_a, member_b)["error"] == "not_member"


class ToolCallingProvider(Provider):
    """Asks for save_user_fact once, then answers with text."""

    name = "tool-calling"

    def __init__(self):
        self.calls = 0

    async def stream(self, request):
        from chatplatform.core.llm.base import Done, TextDelta, Usage

        self.calls += 1
        if self.calls == 1:
            yield ToolCall("call-1", "save_user_fact", {"text": "Prefers tea", "key": "drink"})
            yield Done("tool_use", Usage(10, 5))
        else:
            result = request.messages[-1].content[0]
            yield TextDelta(f"noted {json.loads(result.content)['ok']}")
            yield Done("end_turn", Usage(10, 5))


@pytest.mark.django_db(transaction=True)
def test_executor_runs_inside_the_tool_loop(tenant_a, member_a):
    executor = tool_executor(tenant_id=tenant_a.pk, user_id=member_a.pk)

    async def go():
        request = ChatRequest(
            model="m", messages=[RequestMessage("user", "I like tea")], tools=FACT_TOOLS
        )
        try:
            return [e async for e in stream_with_tools(ToolCallingProvider(), request, executor)]
        finally:
            # The ORM ran in asgiref's sync thread: close that thread's connection.
            await sync_to_async(connections.close_all, thread_sensitive=True)()

    events = asyncio.run(go())
    assert any(getattr(e, "text", "") == "noted True" for e in events)
    assert [f.text for f in facts_list(tenant_a, member_a).items] == ["Prefers tea"]
