"""The fake servers' non-streaming endpoints, through the real SDKs (for other callers)."""

from __future__ import annotations

import anthropic
import openai
import pytest

from tests.fakes import behaviours as b
from tests.fakes.anthropic_fake import FakeAnthropic
from tests.fakes.openai_fake import FakeOpenAI

pytestmark = pytest.mark.asyncio


async def test_anthropic_non_streaming_message(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(
        b.Reply(text="A summary.", tool_uses=(b.FakeToolUse("get_user_facts", {}),))
    )
    client = anthropic.AsyncAnthropic(api_key="k", base_url=fake_anthropic.url, max_retries=0)
    message = await client.messages.create(
        model="claude-test",
        max_tokens=100,
        system=[{"type": "text", "text": "Summarise.", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "long history"}],
    )
    await client.close()

    assert [block.type for block in message.content] == ["text", "tool_use"]
    assert message.stop_reason == "tool_use"
    assert message.usage.cache_creation_input_tokens == b.fake_token_count("Summarise.")
    assert message.usage.input_tokens == b.fake_token_count("long history")


async def test_anthropic_http_error_body_is_the_real_shape(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(b.overloaded())
    client = anthropic.AsyncAnthropic(api_key="k", base_url=fake_anthropic.url, max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as raised:
        await client.messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    await client.close()

    assert raised.value.status_code == 529
    assert raised.value.type == "overloaded_error"


async def test_openai_non_streaming_completion(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(b.Reply(text="Short answer."))
    client = openai.AsyncOpenAI(api_key="x", base_url=f"{fake_openai.url}/v1", max_retries=0)
    completion = await client.chat.completions.create(
        model="llama3.2", messages=[{"role": "user", "content": "question"}]
    )
    await client.close()

    assert completion.choices[0].message.content == "Short answer."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens > 0
