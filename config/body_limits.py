"""Request body limits, enforced at the ASGI layer before Django reads a byte.

Django's ASGI handler reads a whole request body (to memory, then to a temporary file) before
any middleware, authentication or view runs, so a limit checked there comes after the work it
should prevent. This middleware wraps the Django application instead:

- a ``Content-Length`` over the limit of the path is answered 413 at once, without reading the
  body (a client that sent ``Expect: 100-continue`` is never told to send it);
- a body without a length (chunked) is counted as it passes through, and the request is cut
  off with 413 as soon as it passes the limit: Django is told the client went away and
  discards what it read.

The 413 closes the connection (what the client still sends is not read). The API's limit is
``API_MAX_BODY_BYTES`` (room for a message with a 5 MB image as base64); every other path's
is ``REQUEST_MAX_BODY_BYTES``. Both are read on every request, so a settings change applies.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Any, Any, Any], Awaitable[None]]

API_PREFIX = "/api/"
#: The SDK-compatible API (``chats.api.compat``): the API's limit, errors in each SDK's shape.
COMPAT_PREFIX = "/compat/"


#: The upload of a conversations export (the Account page's import): its own, larger limit.
IMPORT_UPLOAD_PATH = "/account/import/"
#: Room for the form's other fields and the multipart framing around the file.
IMPORT_UPLOAD_OVERHEAD = 64 * 1024


def body_limit(path: str) -> int:
    """The largest body, in bytes, accepted for a request to ``path``."""
    if path == IMPORT_UPLOAD_PATH:
        return int(settings.TRANSFER_IMPORT_MAX_BYTES) + IMPORT_UPLOAD_OVERHEAD
    if path.startswith((API_PREFIX, COMPAT_PREFIX)):
        return int(settings.API_MAX_BODY_BYTES)
    return int(settings.REQUEST_MAX_BODY_BYTES)


def declared_length(scope: Scope) -> int | None:
    """The request's ``Content-Length``, or None when it has none (or one the server would
    refuse anyway)."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isascii() and text.isdigit() else None
    return None


def too_large_message(limit: int) -> str:
    return f"The request body is larger than {limit:,} bytes."


async def refuse(scope: Scope, send: Send, limit: int) -> None:
    """Answer 413 and close the connection: in the API's error format under the API, as plain
    text elsewhere."""
    # Imported here: the API's error module loads Django REST framework, whose settings import
    # the API's parsers, which need that module; at ASGI start-up the settings are not ready.
    from chats.api.compat.protocols import protocol_for_path
    from chats.api.errors import error_body

    message = too_large_message(limit)
    path = scope.get("path", "")
    protocol = protocol_for_path(path)
    if protocol is not None:
        body = json.dumps(protocol.error_body(413, message, "too_large")).encode()
        content_type = b"application/json"
    elif path.startswith(API_PREFIX):
        body = json.dumps(error_body("too_large", message)).encode()
        content_type = b"application/json"
    else:
        body = message.encode()
        content_type = b"text/plain; charset=utf-8"
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """ASGI middleware: HTTP request bodies over the path's limit get 413 (see the module)."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = body_limit(scope.get("path", ""))
        declared = declared_length(scope)
        if declared is not None and declared > limit:
            await refuse(scope, send, limit)
            return

        received = 0
        cut_off = False
        responded = False

        async def counted_receive() -> Message:
            nonlocal received, cut_off
            if cut_off:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # To the application the client has gone: Django stops reading and
                    # drops the partial body; the 413 is sent below.
                    cut_off = True
                    return {"type": "http.disconnect"}
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal responded
            if message["type"] == "http.response.start":
                responded = True
            await send(message)

        await self.app(scope, counted_receive, tracked_send)
        if cut_off and not responded:
            await refuse(scope, send, limit)
