"""A conversation with a tool round of an application's tools through the exports: the JSON
export carries each reply's calls and each tool message's results as Claude's tool blocks, an
import restores them paired (the prompt sends them as the provider's own tool blocks again),
a second import into the same account adds nothing, and the Markdown export shows them."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest
from django.core.management import call_command

from chatplatform.core.llm.base import ToolResultPart, ToolUsePart
from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly import assemble_turn
from chats.assembly.request import chat_request
from chats.services import message_create
from chats.services.transcripts import transcript_import
from tests.chats.test_assembly import make_policy
from tests.chats.test_tool_rounds import paired
from tests.factories import make_conversation, make_member
from tests.transfer.test_account_transfers import download_link, latest

pytestmark = pytest.mark.django_db(transaction=True)

CALLS = [
    {"id": "call_stock", "name": "lookup_stock", "input": {"sku": "A-17", "store": "Porto"}},
    {"id": "call_price", "name": "lookup_price", "input": {"sku": "A-17"}},
]
RESULTS = [
    {"tool_use_id": "call_stock", "content": "12 in stock", "is_error": False},
    {"tool_use_id": "call_price", "content": "price service down", "is_error": True},
]
LATER_CALL = {"id": "call_again", "name": "lookup_stock", "input": {"sku": "B-2"}}

FIELDS = ("role", "content", "tool_calls", "tool_results", "tool_group", "created_at")


def with_a_round(tenant, member) -> Conversation:
    """A question, a reply calling two tools, their results, the answer, and a last reply
    whose call nobody answered."""
    conversation = make_conversation(tenant, member, title="Stock check")
    turns = [
        ("user", "Is A-17 in stock in Porto, and what does it cost?"),
        ("assistant", ""),
        ("tool", "12 in stock\n\nprice service down"),
        ("assistant", "12 in stock; the price is unavailable right now."),
        ("user", "And B-2?"),
        ("assistant", "Let me look."),
    ]
    tools: list[dict[str, Any] | None] = [
        None,
        {"tool_calls": CALLS, "tool_group": "call_stock"},
        {"tool_results": RESULTS, "tool_group": "call_stock"},
        None,
        None,
        {"tool_calls": [LATER_CALL], "tool_group": "call_again"},
    ]
    transcript_import(conversation, member, turns, tools=tools)
    return conversation


def stored(conversation: Conversation) -> list[tuple[Any, ...]]:
    with tenant_scope(conversation.tenant_id):
        rows = Message.objects.filter(conversation=conversation).order_by("seq")
        return [tuple(getattr(m, f) for f in FIELDS) for m in rows]


def answered(conversation: Conversation) -> list[str | None]:
    """The role of the message each message answers."""
    with tenant_scope(conversation.tenant_id):
        rows = Message.objects.filter(conversation=conversation).order_by("seq")
        return [m.answers.role if m.answers else None for m in rows.select_related("answers")]


def export_file(client, fmt: str) -> bytes:
    client.post("/account/export/", {"format": fmt})
    response = client.get(download_link(client))
    assert response.status_code == 200
    return b"".join(response.streaming_content)


def import_file(tmp_path, data: bytes, tenant, user) -> dict[str, int]:
    path = tmp_path / "export.json"
    path.write_bytes(data)
    out = io.StringIO()
    args = ["--format", "claude", "--tenant", tenant.slug, "--user", user.username, "--json"]
    call_command("import_conversations", str(path), *args, stdout=out)
    return json.loads(out.getvalue())


def test_a_tool_round_survives_export_and_import(
    client, tenant_a, member_a, jobs_run, followups, tmp_path
):
    original = with_a_round(tenant_a, member_a)
    client.force_login(member_a)
    data = export_file(client, "claude")
    assert latest(tenant_a).result["messages"] == 6

    (item,) = json.loads(data)
    reply, results = item["chat_messages"][1], item["chat_messages"][2]
    assert [b["type"] for b in reply["content"]] == ["tool_use", "tool_use"]
    assert reply["content"][0] == {"type": "tool_use", **CALLS[0]}
    assert results["sender"] == "human"
    assert [(b["type"], b["tool_use_id"], b["is_error"]) for b in results["content"]] == [
        ("tool_result", "call_stock", False),
        ("tool_result", "call_price", True),
    ]

    # Into the same account: it is all there already.
    assert import_file(tmp_path, data, tenant_a, member_a) == {
        "conversations": 0,
        "messages": 0,
        "skipped": 6,
    }
    # Into another account: the same messages, the round's calls and results in their round.
    fresh = make_member(tenant_a, username="fresh-a")
    assert import_file(tmp_path, data, tenant_a, fresh) == {
        "conversations": 1,
        "messages": 6,
        "skipped": 0,
    }
    with tenant_scope(tenant_a):
        copy = Conversation.objects.get(created_by=fresh)
    assert stored(copy) == stored(original)
    assert answered(copy) == [None, "user", None, "tool", None, "user"]

    # The prompt of the copy's next turn sends the round as the provider's tool blocks, paired.
    policy = make_policy(tenant_a)
    question, _ = message_create(
        conversation=copy, role="user", content="Thanks. Anything else?", author=fresh
    )
    request = chat_request(assemble_turn(copy, question, policy=policy), tools=False)
    paired(request)
    sent = [p for m in request.messages if not isinstance(m.content, str) for p in m.content]
    assert {p.id for p in sent if isinstance(p, ToolUsePart)} >= {"call_stock", "call_price"}
    assert {p.tool_use_id for p in sent if isinstance(p, ToolResultPart)} >= {
        "call_stock",
        "call_price",
    }


def test_the_markdown_export_shows_the_round(client, tenant_a, member_a, jobs_run):
    with_a_round(tenant_a, member_a)
    client.force_login(member_a)
    archive = zipfile.ZipFile(io.BytesIO(export_file(client, "markdown")))
    (name,) = archive.namelist()
    text = archive.read(name).decode()
    assert "## Assistant" in text and "## Tool results" in text
    assert "**Tool call** `lookup_stock` (id `call_stock`), input:" in text
    assert '"store": "Porto"' in text
    assert "**Result** of `lookup_stock` (id `call_stock`):\n\n```\n12 in stock\n```" in text
    assert "**Error** from `lookup_price` (id `call_price`):\n\n```\nprice service down" in text
    assert "Let me look.\n\n**Tool call** `lookup_stock` (id `call_again`)" in text


def test_results_are_stored_as_the_database_takes_them(
    client, tenant_a, member_a, jobs_run, followups, tmp_path, settings
):
    """A file's results with a NUL, and results longer in all than the policy's limit: each
    cut to a share of it, the tool message's text theirs."""
    with_a_round(tenant_a, member_a)
    client.force_login(member_a)
    (item,) = json.loads(export_file(client, "claude"))
    blocks = item["chat_messages"][2]["content"]
    blocks[0]["content"] = [{"type": "text", "text": "12 in\x00 stock " + "x" * 3000}]
    blocks[1]["content"] = [{"type": "text", "text": "y" * 3000}]
    item["chat_messages"][1]["content"][0]["input"]["store"] = "Por\x00to"
    settings.CHAT_MAX_MESSAGE_CHARS = 4000
    fresh = make_member(tenant_a, username="fresh-a")
    assert import_file(tmp_path, json.dumps([item]).encode(), tenant_a, fresh)["messages"] == 6
    with tenant_scope(tenant_a):
        copy = Conversation.objects.get(created_by=fresh)
        reply, results = Message.objects.filter(conversation=copy).order_by("seq")[1:3]
    assert reply.tool_calls is not None and results.tool_results is not None
    assert reply.tool_calls[0]["input"]["store"] == "Porto"
    contents = [r["content"] for r in results.tool_results]
    assert contents[0].startswith("12 in stock x") and "[cut at 1,999 characters" in contents[0]
    assert all(len(c) <= 1999 for c in contents)
    assert results.content == "\n\n".join(contents) and len(results.content) <= 4000
    assert results.tool_group == reply.tool_group == "call_stock"
