"""A client's message list as the platform reads it (pure: no Django).

The SDKs send the conversation as a list of messages; the platform stores one message per
turn. A transcript is that list as ``(role, text)`` turns, roles ``user`` and ``assistant``
only, consecutive turns of one role joined into one (as a chat shows them). Its hash chain
names each of its prefixes: ``chain[i]`` hashes the first ``i + 1`` turns, so a stored chain
value says "the conversation starts with exactly these turns" without storing them."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

Turn = tuple[str, str]

USER, ASSISTANT = "user", "assistant"
#: Joins consecutive turns of one role into one stored message.
TURN_JOIN = "\n\n"


def merged(turns: Iterable[Turn]) -> list[Turn]:
    """``turns`` with consecutive turns of the same role joined (:data:`TURN_JOIN`)."""
    out: list[Turn] = []
    for role, text in turns:
        if out and out[-1][0] == role:
            out[-1] = (role, out[-1][1] + TURN_JOIN + text)
        else:
            out.append((role, text))
    return out


def hash_chain(turns: Sequence[Turn]) -> list[str]:
    """The hex SHA-256 chain of ``turns``: each value hashes the one before and the turn."""
    chain: list[str] = []
    previous = ""
    for role, text in turns:
        digest = hashlib.sha256()
        for part in (previous, role, text):
            data = part.encode("utf-8", "surrogatepass")
            digest.update(len(data).to_bytes(8, "big"))
            digest.update(data)
        previous = digest.hexdigest()
        chain.append(previous)
    return chain


def known_turns(
    turns: Sequence[Turn],
    chain: Sequence[str],
    *,
    count: int,
    fingerprint: str,
    stored_after: Sequence[Turn],
    resend: bool = False,
) -> int | None:
    """How many of ``turns`` a conversation already holds, given where its record stands
    (its first ``count`` turns hash to ``fingerprint``) and the turns it stored after them
    (``stored_after``, merged); None when the client's turns do not continue it (another
    start, a stored turn the client does not have or has otherwise). With ``resend``, the
    very turns the record was made from are the same request sent again (all are held)."""
    if not 0 < count <= len(turns) or chain[count - 1] != fingerprint:
        return None
    if resend and count == len(turns):
        return count
    end = count + len(stored_after)
    if end > len(turns) or list(turns[count:end]) != list(stored_after):
        return None
    if end == len(turns) and stored_after:
        return None  # the client's last turn is one the conversation answered already
    return end
