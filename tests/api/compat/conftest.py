"""A live server of the platform for the SDK-compatible API's tests: uvicorn serving the ASGI
application on a thread of the test process (sharing its test database and channel layer),
the model behind the offline provider."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from chatplatform.core.llm.offline_provider import OfflineProvider
from chatplatform.services import api_key_create
from chats.replies import runner
from tests.api.test_live_sse import free_port, wait_for_port


@pytest.fixture
def live_url(transactional_db) -> Iterator[str]:
    import uvicorn

    from config.asgi import application

    runner.provider_factory_set(lambda prepared: OfflineProvider(delay=0.002))
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            application, host="127.0.0.1", port=port, log_level="warning", lifespan="off"
        )
    )
    thread = threading.Thread(target=server.run, name="uvicorn-compat", daemon=True)
    thread.start()
    wait_for_port(port)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.fixture
def key_a(tenant_a, member_a) -> str:
    return api_key_create(tenant=tenant_a, name="sdk", user=member_a)[1]


@pytest.fixture
def key_b(tenant_b, member_b) -> str:
    return api_key_create(tenant=tenant_b, name="sdk", user=member_b)[1]
