"""ASGI entry point: HTTP through Django, WebSockets through Channels."""

from __future__ import annotations

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatplatform.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from chatplatform.routing import websocket_urlpatterns  # noqa: E402
from chatplatform.startup import require_secret_key  # noqa: E402
from chatplatform.tokens import get_counter  # noqa: E402

require_secret_key()

# The vocabularies load once per process, here, rather than inside the first user's turn.
for _counter_name in ("o200k_base", "estimator"):
    get_counter(_counter_name)

# What start-up loaded (Django, the app registry, the vocabularies) lives as long as the
# process: moved out of the collector's generations, it is not rescanned by every full
# collection, which otherwise shows up as tens-of-milliseconds pauses under load.
gc.freeze()

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
