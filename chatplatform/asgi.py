"""ASGI entry point: HTTP through Django, WebSockets through Channels."""

from __future__ import annotations

import asyncio
import gc
import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatplatform.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from chatplatform.routing import websocket_urlpatterns  # noqa: E402
from chatplatform.startup import require_secret_key  # noqa: E402
from chatplatform.tokens import get_counter  # noqa: E402
from chats.replies.warmup import warm_up_database_threads  # noqa: E402

require_secret_key()

# The vocabularies load once per process, here, rather than inside the first user's turn.
for _counter_name in ("o200k_base", "estimator"):
    get_counter(_counter_name)


# Before the first socket: the reply path's database connections, open and warm.
async def lifespan(scope: Any, receive: Any, send: Any) -> None:
    """ASGI lifespan: warm the reply path's database threads at start-up (a server that
    does not send lifespan events skips this, and connections open as they are needed)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            if os.environ.get("WARM_UP", "1") != "0":
                await asyncio.to_thread(warm_up_database_threads)
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


# What start-up loaded (Django, the app registry, the vocabularies) lives as long as the
# process: moved out of the collector's generations, it is not rescanned by every full
# collection, which otherwise shows up as tens-of-milliseconds pauses under load.
gc.freeze()

application = ProtocolTypeRouter(
    {
        "lifespan": lifespan,
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
