"""ASGI entry point: HTTP through Django, WebSockets through Channels."""

from __future__ import annotations

import gc
import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from chatplatform.core.tokens import get_counter  # noqa: E402
from chats.replies.recovery import sweeper_start, sweeper_stop  # noqa: E402
from chats.replies.warmup import warm_up  # noqa: E402
from config.body_limits import BodyLimitMiddleware  # noqa: E402
from config.routing import websocket_urlpatterns  # noqa: E402
from config.startup import require_secret_key, require_static_manifest  # noqa: E402

require_secret_key()
require_static_manifest()

# The vocabularies load once per process, here, rather than inside the first user's turn
# (loaded inside a turn, they would stall every turn of the process). The reply path's
# modules, the provider SDKs among them, are imported at the top of its modules, so the
# routing above has loaded them all.
for _counter_name in ("o200k_base", "estimator"):
    get_counter(_counter_name)


async def lifespan(scope: Any, receive: Any, send: Any) -> None:
    """ASGI lifespan: warm the reply path's database threads and Redis client at start-up
    (``WARM_UP=0`` skips it, as does a server that sends no lifespan events: connections
    then open as they are needed); with in-process coordination, start the reply recovery
    sweep (``chats.replies.recovery``)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            if os.environ.get("WARM_UP", "1") != "0":
                await warm_up()
            sweeper_start()  # replies of dead runners, when no beat can see this process's locks
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await sweeper_stop()
            await send({"type": "lifespan.shutdown.complete"})
            return


# What start-up loaded (Django, the app registry, the vocabularies) lives as long as the
# process: moved out of the collector's generations, it is not rescanned by every full
# collection, which otherwise shows up as tens-of-milliseconds pauses under load.
gc.freeze()

application = ProtocolTypeRouter(
    {
        "lifespan": lifespan,
        "http": BodyLimitMiddleware(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
