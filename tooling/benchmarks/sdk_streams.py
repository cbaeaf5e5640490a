"""The SDKs the SDK-compatible API serves, as a load benchmark drives them: one entry per
protocol, which makes the SDK's async client for a server and streams one turn through it,
telling the caller when the first text arrives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The model a request names; the tenant's policy picks the model that answers.
MODEL = "chatplatform"
#: The server runs as in production, where plain HTTP is redirected unless the TLS proxy in
#: front says it terminated TLS: the clients send the proxy's header, as its health check does.
BEHIND_TLS_PROXY = {"X-Forwarded-Proto": "https"}


@dataclass(frozen=True)
class OpenAIChatCompletions:
    """The ``openai`` SDK's Chat Completions, streamed."""

    name: str = "openai"

    def client(self, server_url: str, key: str, timeout: float) -> Any:
        import openai

        # No retries: a request that fails is counted, not hidden by the SDK sending it again.
        return openai.AsyncOpenAI(
            base_url=f"{server_url}/compat/openai/v1",
            api_key=key,
            timeout=timeout,
            max_retries=0,
            default_headers=BEHIND_TLS_PROXY,
        )

    async def turn(
        self,
        client: Any,
        messages: list[dict[str, str]],
        headers: dict[str, str],
        first_text: Callable[[], None],
    ) -> str:
        """Stream a reply to ``messages``; call ``first_text`` at its first text delta;
        return its text."""
        parts: list[str] = []
        stream = await client.chat.completions.create(
            model=MODEL, messages=messages, stream=True, extra_headers=headers
        )
        async with stream:
            async for chunk in stream:
                text = chunk.choices[0].delta.content if chunk.choices else None
                if text:
                    if not parts:
                        first_text()
                    parts.append(text)
        return "".join(parts)


@dataclass(frozen=True)
class AnthropicMessages:
    """The ``anthropic`` SDK's Messages, streamed."""

    name: str = "anthropic"

    def client(self, server_url: str, key: str, timeout: float) -> Any:
        import anthropic

        return anthropic.AsyncAnthropic(
            base_url=f"{server_url}/compat/anthropic",  # the SDK adds /v1/messages
            api_key=key,
            timeout=timeout,
            max_retries=0,
            default_headers=BEHIND_TLS_PROXY,
        )

    async def turn(
        self,
        client: Any,
        messages: list[dict[str, str]],
        headers: dict[str, str],
        first_text: Callable[[], None],
    ) -> str:
        """Stream a reply to ``messages``; call ``first_text`` at its first text delta;
        return its text."""
        parts: list[str] = []
        async with client.messages.stream(
            model=MODEL, max_tokens=1024, messages=messages, extra_headers=headers
        ) as stream:
            async for text in stream.text_stream:
                if text:
                    if not parts:
                        first_text()
                    parts.append(text)
        return "".join(parts)


SdkProtocol = OpenAIChatCompletions | AnthropicMessages

#: Every protocol the benchmark drives, in the order it runs them (and reports them).
SDK_PROTOCOLS: tuple[SdkProtocol, ...] = (OpenAIChatCompletions(), AnthropicMessages())
