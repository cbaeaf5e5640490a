"""The pure writers and reader of a tool round: a reply's calls of an application's tools as
``tool_use`` blocks and the message of their results as ``tool_result`` blocks in Claude's
export shape, read back paired; Claude's own tools' blocks left out; results that answer no
call refused; the round in Markdown."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from chatplatform.core.transfer.claude import read_claude
from chatplatform.core.transfer.records import (
    TransferConversation,
    TransferFormatError,
    TransferMessage,
)
from chatplatform.core.transfer.writers import claude_shape, markdown_document

AT = datetime(2025, 2, 3, 10, 0, tzinfo=UTC)

CALLS = (
    {"id": "toolu_01", "name": "get_weather", "input": {"city": "Lisboa", "days": 2}},
    {"id": "toolu_02", "name": "local_time", "input": {}},
)
RESULT_TEXT = "Sunny, 21 °C\n```not a fence```"
RESULTS = (
    {"tool_use_id": "toolu_01", "content": RESULT_TEXT, "is_error": False},
    {"tool_use_id": "toolu_02", "content": "", "is_error": True},
)


def conversation(*messages: TransferMessage) -> TransferConversation:
    return TransferConversation("cp-1-c7", "Weather", AT, AT, messages)


def round_trip_conversation() -> TransferConversation:
    return conversation(
        TransferMessage("m1", "user", "Weather in Lisbon, and the time there?", AT),
        TransferMessage("m2", "assistant", "", AT, tool_calls=CALLS, tool_group="toolu_01"),
        TransferMessage("m3", "tool", RESULT_TEXT, AT, tool_results=RESULTS, tool_group="toolu_01"),
        TransferMessage("m4", "assistant", "Sunny; the clock did not answer.", AT),
        TransferMessage(
            "m5",
            "assistant",
            "Checking once more.",
            AT,
            tool_calls=({"id": "toolu_03", "name": "local_time", "input": {"tz": "WET"}},),
            tool_group="toolu_03",
        ),
    )


def exported(item: TransferConversation) -> list[dict[str, Any]]:
    """What the JSON export writes, as the importer parses it."""
    return json.loads(json.dumps([claude_shape(item)], ensure_ascii=False))


def test_calls_and_results_are_claude_blocks() -> None:
    messages = exported(round_trip_conversation())[0]["chat_messages"]
    reply, results = messages[1], messages[2]
    assert reply["sender"] == "assistant" and reply["text"] == ""
    assert reply["content"] == [
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": CALLS[0]["input"]},
        {"type": "tool_use", "id": "toolu_02", "name": "local_time", "input": {}},
    ]
    assert results["sender"] == "human"
    assert results["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_01",
            "name": "get_weather",
            "content": [{"type": "text", "text": RESULT_TEXT}],
            "is_error": False,
        },
        {
            "type": "tool_result",
            "tool_use_id": "toolu_02",
            "name": "local_time",
            "content": [],
            "is_error": True,
        },
    ]
    # A reply with text and calls: the text first, then the calls.
    assert [b["type"] for b in messages[4]["content"]] == ["text", "tool_use"]


def test_the_reader_restores_the_round_paired() -> None:
    item = round_trip_conversation()
    (back,) = read_claude(exported(item))
    assert back == item
    reply, results = back.messages[1], back.messages[2]
    assert reply.tool_group == results.tool_group == "toolu_01"
    assert {c["id"] for c in reply.tool_calls} == {r["tool_use_id"] for r in results.tool_results}
    # A call no result answered (yet) is kept with its reply.
    assert back.messages[4].tool_calls[0]["id"] == "toolu_03"


def test_result_content_as_a_string_or_text_blocks() -> None:
    document = exported(round_trip_conversation())
    blocks = document[0]["chat_messages"][2]["content"]
    blocks[0]["content"] = "plain string"
    blocks[1]["content"] = [{"type": "text", "text": "12:00"}, {"type": "text", "text": "WET"}]
    (back,) = read_claude(document)
    assert [r["content"] for r in back.messages[2].tool_results] == ["plain string", "12:00\nWET"]
    assert back.messages[2].text == "plain string\n\n12:00\nWET"


def test_results_beside_text_are_two_messages() -> None:
    document = exported(round_trip_conversation())
    document[0]["chat_messages"][2]["content"].append({"type": "text", "text": "Also: thanks."})
    (back,) = read_claude(document)
    roles = [(m.source_id, m.role) for m in back.messages]
    assert roles[2:4] == [("m3", "tool"), ("m3:text", "user")]
    assert back.messages[3].text == "Also: thanks."


def test_claudes_own_tool_blocks_are_left_out() -> None:
    """Claude's export holds its own tools (they ran at Claude): a ``tool_use`` without an
    id, or one whose result sits in the same reply. Only the text is read, as before."""
    document = [
        {
            "uuid": "c1",
            "name": "Search",
            "chat_messages": [
                {"uuid": "h1", "sender": "human", "text": "Find it.", "content": []},
                {
                    "uuid": "a1",
                    "sender": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
                        {"type": "tool_result", "name": "web_search", "content": []},
                        {"type": "text", "text": "Found it."},
                    ],
                },
                {
                    "uuid": "a2",
                    "sender": "assistant",
                    "content": [
                        {"type": "tool_use", "name": "artifacts", "input": {}},
                        {"type": "text", "text": "Here it is."},
                    ],
                },
            ],
        }
    ]
    (back,) = read_claude(document)
    assert [(m.role, m.text, m.tool_calls) for m in back.messages] == [
        ("user", "Find it.", ()),
        ("assistant", "Found it.", ()),
        ("assistant", "Here it is.", ()),
    ]


def test_results_that_answer_no_call_refuse_the_file() -> None:
    document = exported(round_trip_conversation())
    document[0]["chat_messages"][2]["content"][0]["tool_use_id"] = "toolu_99"
    with pytest.raises(TransferFormatError, match=r"message 3: .*answer no call"):
        read_claude(document)
    document = exported(round_trip_conversation())
    del document[0]["chat_messages"][1]  # the reply that made the calls
    with pytest.raises(TransferFormatError, match="answer no call"):
        read_claude(document)


def test_results_that_do_not_answer_each_call_once_refuse_the_file() -> None:
    # Message 3 holds the results of the two parallel calls of message 2.
    document = exported(round_trip_conversation())
    results = document[0]["chat_messages"][2]["content"]
    results[1] = {**results[1], "tool_use_id": results[0]["tool_use_id"]}  # one call twice
    with pytest.raises(TransferFormatError, match=r"message 3: .*exactly once"):
        read_claude(document)
    document = exported(round_trip_conversation())
    del document[0]["chat_messages"][2]["content"][1]  # a call left without its result
    with pytest.raises(TransferFormatError, match="exactly once"):
        read_claude(document)
    document = exported(round_trip_conversation())
    again = document[0]["chat_messages"][2]
    document[0]["chat_messages"].insert(3, {**again, "uuid": "again"})  # answered twice
    with pytest.raises(TransferFormatError, match=r"message 4: .*already answered"):
        read_claude(document)


def test_a_call_id_the_platform_cannot_store_refuses_the_file() -> None:
    document = exported(round_trip_conversation())
    document[0]["chat_messages"][1]["content"][0]["id"] = "x" * 65
    with pytest.raises(TransferFormatError, match="message 2: a tool call's id"):
        read_claude(document)


def test_markdown_shows_calls_and_results() -> None:
    text = markdown_document(round_trip_conversation())
    assert "## Tool results" in text
    assert "**Tool call** `get_weather` (id `toolu_01`), input:" in text
    assert '```json\n{\n  "city": "Lisboa",\n  "days": 2\n}\n```' in text
    # The result's own backticks do not close its block; an empty failed result says so.
    assert "**Result** of `get_weather` (id `toolu_01`):\n\n````\nSunny, 21 °C" in text
    assert "**Error** from `local_time` (id `toolu_02`):\n\n_(no output)_" in text
    assert "Checking once more.\n\n**Tool call** `local_time` (id `toolu_03`)" in text
