"""Shared helpers of the durability and fault tests: WebSocket clients on the ASGI app, the
stored rows of a conversation, and a provider factory that drives the real SDKs against the
fake servers with test-sized timeouts while recording every backoff the retry policy chose."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from chatplatform.core.llm.anthropic_provider import AnthropicProvider
from chatplatform.core.llm.base import Provider
from chatplatform.core.llm.openai_provider import OpenAICompatibleProvider
from chatplatform.core.llm.retry import RetryPolicy
from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from config.asgi import application
from tests.replies.conftest import session_headers

FINAL = ("done", "error")


async def ws_connect(conversation: Any, user: Any) -> WebsocketCommunicator:
    headers = await database_sync_to_async(session_headers)(user)
    communicator = WebsocketCommunicator(
        application, f"/ws/conversations/{conversation.pk}/", headers=headers
    )
    connected, code = await communicator.connect(timeout=10)
    assert connected, code
    return communicator


async def receive_until(
    ws: WebsocketCommunicator, done: Any, timeout: float = 15
) -> list[dict[str, Any]]:
    """Frames until ``done(frame)`` is true (that frame included)."""
    frames: list[dict[str, Any]] = []
    while True:
        frame = await ws.receive_json_from(timeout=timeout)
        frames.append(frame)
        if done(frame):
            return frames


def final_frame(frame: dict[str, Any]) -> bool:
    return frame.get("type") in FINAL


async def drain(ws: WebsocketCommunicator, quiet: float = 0.3) -> list[dict[str, Any]]:
    """Every frame that arrives until the socket has been quiet for ``quiet`` seconds."""
    frames = []
    # receive_nothing, not a timed-out receive: a receive timeout cancels the application.
    while not await ws.receive_nothing(timeout=quiet):
        frames.append(await ws.receive_json_from(timeout=5))
    return frames


def conversation_rows(conversation: Any) -> list[dict[str, Any]]:
    with tenant_scope(conversation.tenant_id):
        rows = (
            Message.objects.filter(conversation_id=conversation.pk)
            .order_by("seq")
            .values(
                "pk",
                "role",
                "status",
                "content",
                "client_id",
                "answers_id",
                "error_code",
                "error_message",
            )
        )
        return [dict(row) for row in rows]


async def rows_async(conversation: Any) -> list[dict[str, Any]]:
    return await database_sync_to_async(conversation_rows)(conversation)


async def wait_for_rows(conversation: Any, predicate: Any, timeout: float = 15) -> list[Any]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        rows = await rows_async(conversation)
        if predicate(rows) or asyncio.get_running_loop().time() > deadline:
            return rows
        await asyncio.sleep(0.05)


@dataclass
class SdkProviders:
    """A ``runner.provider_factory_set`` factory: the real SDK provider of the turn's model
    against a fake server, with a short idle timeout and fast (recorded) backoff sleeps."""

    anthropic_url: str = ""
    openai_url: str = ""
    policy: RetryPolicy = field(
        default_factory=lambda: RetryPolicy(max_attempts=3, base_delay=0.4, max_delay=2.0)
    )
    idle_timeout: float = 0.5
    delays: list[float] = field(default_factory=list)

    async def sleep(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(min(seconds, 0.01))

    def __call__(self, prepared: Any) -> Provider:
        if prepared.provider_name == "anthropic":
            return AnthropicProvider(
                api_key="sk-test",
                base_url=self.anthropic_url,
                timeout=10,
                idle_timeout=self.idle_timeout,
                retry_policy=self.policy,
                sleep=self.sleep,
            )
        assert prepared.provider_name == "openai", prepared.provider_name
        return OpenAICompatibleProvider(
            base_url=self.openai_url + "/v1",
            timeout=10,
            idle_timeout=self.idle_timeout,
            retry_policy=self.policy,
            sleep=self.sleep,
        )
