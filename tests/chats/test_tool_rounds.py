"""A client's tool rounds in the prompt: stored calls and results go to the provider as its own
tool blocks, a call and its results are kept or dropped together whatever the budget trims,
the results sent as the new message keep the call they answer, and a round whose results do
not answer its calls one for one goes as text."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from chatplatform.core.llm.anthropic_payload import build_params
from chatplatform.core.llm.base import ChatRequest, TextPart, ToolResultPart, ToolUsePart
from chatplatform.core.llm.openai_provider import build_params as openai_params
from chats.assembly import assemble_turn
from chats.assembly.request import chat_request
from chats.services import message_create
from chats.services.transcripts import transcript_import
from tests.chats.test_assembly import make_policy
from tests.fakes.tool_pairing import anthropic_pairing_error, openai_pairing_error

pytestmark = pytest.mark.django_db


def rounds(count: int) -> tuple[list[tuple[str, str]], list[dict[str, Any] | None]]:
    """``count`` exchanges, each a question, a reply calling a tool, its result and the answer."""
    turns: list[tuple[str, str]] = []
    tools: list[dict[str, Any] | None] = []
    for i in range(count):
        call: dict[str, Any] = {
            "id": f"call_{i}",
            "name": "lookup",
            "input": {"q": f"item {i} " * 20},
        }
        result: dict[str, Any] = {
            "tool_use_id": f"call_{i}",
            "content": f"result {i} " * 40,
            "is_error": False,
        }
        turns += [
            ("user", f"Question {i} about the stock of item {i}."),
            ("assistant", ""),
            ("tool", result["content"]),
            ("assistant", f"Answer {i}: the stock is fine."),
        ]
        tools += [
            None,
            {"tool_calls": [call], "tool_group": call["id"]},
            {"tool_results": [result], "tool_group": call["id"]},
            None,
        ]
    return turns, tools


def paired(request: ChatRequest) -> None:
    """Every tool call is answered in the next message, every result answers the one before."""
    messages = list(request.messages)
    for i, message in enumerate(messages):
        parts = [] if isinstance(message.content, str) else list(message.content)
        calls = {p.id for p in parts if isinstance(p, ToolUsePart)}
        results = [p for p in parts if isinstance(p, ToolResultPart)]
        if calls:
            after = messages[i + 1].content
            assert not isinstance(after, str)
            assert calls == {p.tool_use_id for p in after if isinstance(p, ToolResultPart)}
        if results:
            before = messages[i - 1].content
            assert not isinstance(before, str)
            assert {p.tool_use_id for p in results} == {
                p.id for p in before if isinstance(p, ToolUsePart)
            }
            # Results first: Anthropic refuses text before them.
            assert all(isinstance(p, ToolResultPart) for p in parts[: len(results)])


@pytest.mark.parametrize("budget", [3000, 4000, 6000, 12000])
def test_rounds_stay_whole_and_paired_whatever_the_budget(conversation, member_a, tenant_a, budget):
    policy = make_policy(tenant_a, max_context_tokens=budget, min_recent_messages=2)
    turns, tools = rounds(30)
    transcript_import(conversation, member_a, turns, tools=tools)
    message, _ = message_create(
        conversation=conversation, role="user", content="And item 3?", author=member_a
    )
    turn = assemble_turn(conversation, message, policy=policy)
    request = chat_request(turn, tools=False)
    paired(request)
    assert turn.prompt.prompt_tokens <= turn.prompt.budget
    structured = [
        p
        for m in request.messages
        if not isinstance(m.content, str)
        for p in m.content
        if isinstance(p, ToolUsePart)
    ]
    assert structured, "the newest rounds go as tool blocks"
    assert structured[-1].id == "call_29" and structured[-1].input["q"].startswith("item 29")
    # Both providers' payloads take it (cache marks included), paired by their own rules.
    assert anthropic_pairing_error(build_params(request)) is None
    assert openai_pairing_error(openai_params(request)) is None
    sent = openai_params(request)["messages"]
    tool_messages = [m for m in sent if m["role"] == "tool"]
    assert tool_messages and all(
        any(c["id"] == t["tool_call_id"] for m in sent for c in m.get("tool_calls", []))
        for t in tool_messages
    )


def test_results_sent_as_the_new_message_keep_their_call(conversation, member_a, tenant_a):
    policy = make_policy(tenant_a)
    turns, tools = rounds(2)
    transcript_import(conversation, member_a, turns[:2], tools=tools[:2])  # the call, unanswered
    result = {"tool_use_id": "call_0", "content": "42 in stock", "is_error": False}
    message, _ = message_create(
        conversation=conversation,
        role="tool",
        content="42 in stock",
        author=member_a,
        tool_fields={"tool_results": [result], "tool_group": "call_0"},
    )
    turn = assemble_turn(conversation, message, policy=policy)
    request = chat_request(turn, tools=False)
    paired(request)
    last = request.messages[-1]
    assert not isinstance(last.content, str)
    assert last.content[0] == ToolResultPart("call_0", "42 in stock")
    assert any(isinstance(p, TextPart) for p in request.messages[-2].content) is False


def test_the_chat_page_and_the_api_show_a_round(client, conversation, member_a):
    client.force_login(member_a)
    member_client = client
    turns, tools = rounds(1)
    transcript_import(conversation, member_a, turns, tools=tools)
    page = member_client.get(
        reverse("chats_ui:conversation_detail", args=[conversation.pk])
    ).content.decode()
    assert 'class="msg-tools"' in page and "<code>lookup</code>" in page
    assert "Tool results" in page
    listed = member_client.get(f"/api/v1/conversations/{conversation.pk}/messages/").json()
    found = listed["results"] if isinstance(listed, dict) else listed
    calls = [m["tool_calls"] for m in found if m["tool_calls"]]
    assert calls and calls[0][0]["name"] == "lookup"
    assert any(m["tool_results"] for m in found)


@pytest.mark.parametrize(
    "answered",
    [["call_a"], ["call_a", "call_b", "call_b"], ["call_a", "call_x"]],
    ids=["a_call_unanswered", "a_call_answered_twice", "a_result_for_no_call"],
)
def test_a_stored_round_not_answered_exactly_goes_as_text(
    conversation, member_a, tenant_a, answered
):
    """A round stored before its results were checked (an older version, an import) whose
    results do not answer its calls one for one: the prompt keeps it, as text, and both
    providers' payloads pass their own pairing rules."""
    policy = make_policy(tenant_a)
    calls = [{"id": i, "name": "lookup", "input": {"q": i}} for i in ("call_a", "call_b")]
    results = [{"tool_use_id": i, "content": f"found {i}", "is_error": False} for i in answered]
    transcript_import(
        conversation,
        member_a,
        [("user", "Look both up."), ("assistant", ""), ("tool", "found"), ("assistant", "Done.")],
        tools=[
            None,
            {"tool_calls": calls, "tool_group": "call_a"},
            {"tool_results": results, "tool_group": "call_a"},
            None,
        ],
    )
    message, _ = message_create(
        conversation=conversation, role="user", content="And now?", author=member_a
    )
    request = chat_request(assemble_turn(conversation, message, policy=policy), tools=False)
    parts = [p for m in request.messages if not isinstance(m.content, str) for p in m.content]
    texts = " ".join(
        m.content
        if isinstance(m.content, str)
        else " ".join(getattr(p, "text", "") for p in m.content)
        for m in request.messages
    )
    assert not any(isinstance(p, ToolUsePart | ToolResultPart) for p in parts)
    assert "[tool call]" in texts and "[tool result]: found" in texts
    assert anthropic_pairing_error(build_params(request)) is None
    assert openai_pairing_error(openai_params(request)) is None
