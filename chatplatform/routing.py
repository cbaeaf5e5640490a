"""WebSocket routes (the chat consumers are added by the replies feature)."""

from __future__ import annotations

from typing import Any

websocket_urlpatterns: list[Any] = []
