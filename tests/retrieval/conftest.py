from __future__ import annotations

from tests.factories import make_message


def add(conversation, author, *texts, role="user"):
    """Store messages; return them."""
    return [make_message(conversation, t, role=role, author=author) for t in texts]
