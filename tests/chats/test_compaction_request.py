"""The provider's compaction block goes first in the history, in an assistant turn, marked for
caching, whatever the history after it starts with."""

from __future__ import annotations

from chatplatform.core.context.formatting import CONVERSATION_START
from chatplatform.core.llm.base import CompactionPart, RequestMessage, TextPart
from chats.assembly.request import with_compaction

BLOCK = {"content": "Earlier: the budget.", "encrypted_content": "enc-1", "signature": "sig"}
PART = CompactionPart("Earlier: the budget.", "enc-1", "sig")


def test_the_block_joins_the_reply_that_carried_it():
    messages = [
        RequestMessage("user", CONVERSATION_START),
        RequestMessage("assistant", "The budget passed."),
        RequestMessage("user", [TextPart("And the ferry?")]),
    ]
    out, marks = with_compaction(messages, ((2, 0),), BLOCK)
    assert out[1] == RequestMessage("assistant", [PART, TextPart("The budget passed.")])
    assert out[0] == messages[0] and out[2] == messages[2]
    assert marks == ((1, 0), (2, 0))


def test_a_history_starting_with_a_user_turn_gets_an_opening_pair():
    messages = [
        RequestMessage("user", "Hi"),
        RequestMessage("assistant", "Hello"),
        RequestMessage("user", "Again"),
    ]
    out, marks = with_compaction(messages, ((1, 0), (2, 0)), BLOCK)
    assert [m.role for m in out] == ["user", "assistant", "user", "assistant", "user"]
    assert out[0].content == CONVERSATION_START and out[1].content == [PART]
    assert marks == ((1, 0), (3, 0), (4, 0))
