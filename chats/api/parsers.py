"""A JSON parser that refuses bodies larger than ``API_MAX_BODY_BYTES`` with 413, and
malformed or too deeply nested ones with 400.

The API has its own limit, not Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (form data, 2 MB by
default, which a message with a 5 MB image as base64 passes): the ASGI server refuses a larger
body before reading it (``config.body_limits``), the base view checks the declared
``Content-Length``, and this parser the bytes it reads. The parser reads the request as a
stream: DRF gives its own ``JSONParser`` (and subclasses) ``request.body``, which is held to
Django's form-data limit and raised an unhandled error for any larger message."""

from __future__ import annotations

import codecs
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer

if TYPE_CHECKING:
    from chats.api.errors import RequestTooLarge


def max_body_bytes() -> int:
    return int(settings.API_MAX_BODY_BYTES)


def too_large(limit: int) -> RequestTooLarge:
    # Imported here: REST framework's views module reads its settings, which import this
    # parser, when it is loaded; the errors module imports REST framework's views. A module
    # that imports the errors first would otherwise find this one half loaded.
    from chats.api.errors import RequestTooLarge

    return RequestTooLarge(f"The request body is larger than {limit:,} bytes.")


class LimitedJSONParser(BaseParser):
    """JSON bodies of at most ``API_MAX_BODY_BYTES`` bytes (413 otherwise)."""

    media_type = "application/json"
    renderer_class = JSONRenderer

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        limit = max_body_bytes()
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise too_large(limit)
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.decode(raw, encoding)
            return json.loads(text, parse_constant=_reject_constant)
        except (ValueError, LookupError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        except RecursionError:
            # The decoder recurses once per level: a body nested past the interpreter's limit
            # is refused like any other malformed body.
            raise ParseError("JSON parse error - the body is nested too deeply.") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")
