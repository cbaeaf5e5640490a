"""The ``text/event-stream`` media type, so content negotiation can pick server-sent events.

Event streams themselves are written by :mod:`chats.api.streaming`; this renderer only renders
a plain response body as one event (errors are always switched to JSON by the base view)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import BaseRenderer


def sse_frame(event: str, data: Any) -> bytes:
    """One server-sent event: ``event: <name>`` and a one-line JSON ``data``."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"event: {event}\ndata: {payload}\n\n".encode()


class EventStreamRenderer(BaseRenderer):
    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if data is None:
            return b""
        return sse_frame("message", data)
