"""ASGI entry point: HTTP through Django, WebSockets through Channels."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatplatform.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from chatplatform.routing import websocket_urlpatterns  # noqa: E402
from chatplatform.tokens import get_counter  # noqa: E402

# The vocabularies load once per process, here, rather than inside the first user's turn.
for _counter_name in ("o200k_base", "estimator"):
    get_counter(_counter_name)

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
