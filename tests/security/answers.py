"""Comparing two answers of the route matrix: the one for tenant A's object and the one for a
missing object must be equal once CSRF tokens and the objects' own values are neutralised."""

from __future__ import annotations

import json
import re
from typing import Any

_CSRF = re.compile(r'(csrfmiddlewaretoken" value="|csrftoken=|"csrfToken": ")[^"&;]+')


def normalize(text: str, values: list[tuple[Any, str]]) -> str:
    """``text`` with the CSRF tokens and the given (value, placeholder) pairs neutralised."""
    text = _CSRF.sub(r"\1CSRF", text)
    for value, placeholder in values:
        if isinstance(value, int):
            text = re.sub(rf"(?<![\w.-]){value}(?![\w.-])", placeholder, text)
        else:
            text = text.replace(str(value), placeholder)
    return text


def body_text(response: Any) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode(errors="replace")
    return response.content.decode(errors="replace")


def comparable(response: Any, values: list[tuple[Any, str]]) -> dict[str, Any]:
    """What must be equal between the answer for A's object and for a missing one."""
    text = body_text(response)
    content_type = response.get("Content-Type", "")
    body: Any
    if content_type.startswith("application/json"):
        try:
            body = json.loads(normalize(text, values))
        except ValueError:
            body = normalize(text, values)
    else:
        body = normalize(text, values)
    return {
        "status": response.status_code,
        "location": normalize(response.get("Location", ""), values),
        "content_type": content_type.split(";")[0],
        "body": body,
    }
