"""The provider's own context management through the real SDK against the fake: server
compaction (the block, its stream events, its separately billed usage, sending it back),
context editing (what was cleared) and the stop reasons that end a reply at a limit."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from chatplatform.core.llm import ChatRequest, Done, RequestMessage, TextPart, Usage
from chatplatform.core.llm.anthropic_payload import build_params
from chatplatform.core.llm.anthropic_provider import AnthropicProvider
from chatplatform.core.llm.base import (
    Compaction,
    CompactionPart,
    ContextEdited,
    ToolResultPart,
    ToolUsePart,
)
from chatplatform.core.llm.context_management import (
    ContextManagement,
    compaction_trigger,
    min_budget_for_compaction,
)
from tests.fakes import behaviours as b
from tests.fakes.anthropic_fake import FakeAnthropic

from .helpers import collect, text_of

MakeProvider = Callable[..., AnthropicProvider]
#: About 250 fake tokens per message.
LONG = "The committee discussed the harbour budget and the new ferry timetable. " * 14


def history(turns: int) -> list[RequestMessage]:
    out: list[RequestMessage] = []
    for i in range(turns):
        out.append(RequestMessage("user", f"Question {i}: {LONG}"))
        out.append(RequestMessage("assistant", f"Answer {i}: {LONG}"))
    return [*out, RequestMessage("user", "And what about the ferry?")]


def request(messages: list[RequestMessage], management: ContextManagement) -> ChatRequest:
    return ChatRequest(
        model="claude-test", messages=messages, system="Be brief.", context_management=management
    )


@pytest.mark.asyncio
async def test_past_the_trigger_the_reply_starts_with_a_compaction_billed_apart(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    fake_anthropic.script(b.Reply("The ferry leaves at nine."))
    events = await collect(
        anthropic_provider().stream(request(history(10), ContextManagement(compact_trigger=2000)))
    )

    (recorded,) = fake_anthropic.requests_to("/v1/messages")
    assert recorded.body["context_management"] == {
        "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 2000}}]
    }
    assert "compact-2026-01-12" in recorded.headers["anthropic-beta"]
    (compaction,) = [e for e in events if isinstance(e, Compaction)]
    assert compaction.part.content is not None
    assert compaction.part.content.startswith("Summary of the conversation so far")
    assert "Question 0" in compaction.part.content  # it summarises the earlier part
    assert compaction.part.encrypted_content and compaction.part.encrypted_content.startswith("enc")
    # The compaction's own sampling: the whole input, outside the reply's usage.
    assert compaction.usage.input_tokens > 5000
    assert compaction.usage.output_tokens > 0
    usage = [e for e in events if isinstance(e, Usage)][-1]  # the last: the whole call's
    assert usage.total_input_tokens < compaction.usage.input_tokens  # answered compacted
    assert text_of(events) == "The ferry leaves at nine."
    assert events[-1] == Done("end_turn", usage)


@pytest.mark.asyncio
async def test_below_the_trigger_nothing_is_compacted(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    events = await collect(
        anthropic_provider().stream(request(history(1), ContextManagement(compact_trigger=50_000)))
    )
    assert not [e for e in events if isinstance(e, Compaction | ContextEdited)]


@pytest.mark.asyncio
async def test_a_compaction_sent_back_replaces_what_precedes_it(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    block = CompactionPart("Earlier: the harbour budget.", "enc-1", None)
    messages = [
        *history(3)[:-1],
        RequestMessage("assistant", [block, TextPart("The budget passed.")]),
        RequestMessage("user", "And the ferry?"),
    ]
    await collect(
        anthropic_provider().stream(request(messages, ContextManagement(compact_trigger=50_000)))
    )

    sent = fake_anthropic.message_requests[0]["messages"][6]["content"][0]
    assert sent == {
        "type": "compaction",
        "content": "Earlier: the harbour budget.",
        "encrypted_content": "enc-1",
    }
    answered = fake_anthropic.outcomes[0].body["messages"]
    assert answered[0]["content"][0]["type"] == "compaction"  # the earlier turns were dropped
    assert len(answered) == 2


@pytest.mark.asyncio
async def test_clearing_old_tool_uses_reports_what_was_cleared(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    messages: list[RequestMessage] = [RequestMessage("user", "Remember my facts.")]
    for i in range(5):
        messages.append(
            RequestMessage(
                "assistant", [ToolUsePart(f"toolu_{i}", "save_user_fact", {"text": LONG})]
            )
        )
        messages.append(
            RequestMessage("user", [ToolResultPart(f"toolu_{i}", f'{{"saved": "{LONG}"}}')])
        )
    messages.append(RequestMessage("assistant", "Saved."))
    messages.append(RequestMessage("user", "Thanks."))
    management = ContextManagement(clear=("clear_tool_uses_20250919",), clear_trigger=1000)
    events = await collect(anthropic_provider().stream(request(messages, management)))

    recorded = fake_anthropic.requests_to("/v1/messages")[0]
    assert "context-management-2025-06-27" in recorded.headers["anthropic-beta"]
    (edited,) = [e for e in events if isinstance(e, ContextEdited)]
    (edit,) = edited.applied_edits
    assert edit["type"] == "clear_tool_uses_20250919"
    assert edit["cleared_tool_uses"] == 2  # five uses, the newest three kept
    assert edit["cleared_input_tokens"] > 0


@pytest.mark.asyncio
async def test_an_edit_without_its_beta_header_is_refused_by_the_fake(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    provider = anthropic_provider()
    params = build_params(request(history(1), ContextManagement(compact_trigger=50_000)))
    params.pop("betas")
    with pytest.raises(Exception, match="compact-2026-01-12"):
        await provider._client.beta.messages.create(**params)  # no beta header


@pytest.mark.parametrize("reason", ["max_tokens", "model_context_window_exceeded"])
@pytest.mark.asyncio
async def test_a_limit_stop_reason_reaches_the_caller(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider, reason: str
) -> None:
    fake_anthropic.script(b.Reply("Cut off in the mid", stop_reason=reason))
    events = await collect(anthropic_provider().stream(request(history(1), ContextManagement())))
    assert isinstance(events[-1], Done) and events[-1].stop_reason == reason
    assert "context_management" not in fake_anthropic.message_requests[0]


def test_the_trigger_follows_the_budget_and_never_falls_below_the_minimum() -> None:
    assert compaction_trigger(100_000) == 80_000
    assert compaction_trigger(40_000) == 50_000
    assert compaction_trigger(min_budget_for_compaction()) == 50_000
    edits = ContextManagement(
        compact_trigger=80_000,
        clear=("clear_tool_uses_20250919", "clear_thinking_20251015"),
        clear_trigger=80_000,
    ).edits()
    # Thinking edits go first, as the API asks; compaction last.
    assert [e["type"] for e in edits] == [
        "clear_thinking_20251015",
        "clear_tool_uses_20250919",
        "compact_20260112",
    ]
