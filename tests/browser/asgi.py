"""Test-only ASGI entry point for the browser tests: the platform's application with the
offline provider made controllable through environment variables, read on every reply:

- ``BROWSER_TEST_PROVIDER_DELAY``: seconds between streamed words (a slow reply to stop);
- a user message containing ``FAIL_ONCE_MARKER`` makes the first attempt at its reply fail
  like an unreachable provider (to exercise the error and the Retry button).

Serve it with ``uvicorn tests.browser.asgi:application`` (the browser tests run it in a thread
of the test process, on the test database).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

from chatplatform.core.llm.base import ChatRequest, Provider, StreamEvent, message_text
from chatplatform.core.llm.errors import ProviderUnreachable
from chatplatform.core.llm.offline_provider import OfflineProvider
from chats.replies import runner
from chats.replies.turns import PreparedTurn
from config.asgi import application as platform_application

DELAY_VARIABLE = "BROWSER_TEST_PROVIDER_DELAY"
FAIL_ONCE_MARKER = "[fail-once]"
_failed_already: set[str] = set()


class ControllableOfflineProvider(OfflineProvider):
    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        last_user = next((m for m in reversed(request.messages) if m.role == "user"), None)
        text = message_text(last_user) if last_user is not None else ""
        if FAIL_ONCE_MARKER in text and text not in _failed_already:
            _failed_already.add(text)
            raise ProviderUnreachable("the test provider is unreachable")
        async for event in super().stream(request):
            yield event


def provider_factory(prepared: PreparedTurn) -> Provider:
    if prepared.provider_name != "offline":
        return runner.default_provider(prepared)
    delay = float(os.environ.get(DELAY_VARIABLE, "0") or 0)
    simulated = prepared.simulated_cache.cache if prepared.simulated_cache is not None else None
    return ControllableOfflineProvider(delay=delay, prompt_cache=simulated)


def install() -> None:
    runner.provider_factory_set(provider_factory)


install()
application = platform_application
