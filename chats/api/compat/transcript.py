"""A client's message list as the platform reads it (pure: no Django).

The SDKs send the conversation as a list of messages; the platform stores one message per
turn. A transcript is that list as ``(role, text)`` turns, roles ``user`` and ``assistant``
only, consecutive turns of one role joined into one (as a chat shows them). Its hash chain
names each of its prefixes: ``chain[i]`` hashes the first ``i + 1`` turns, so a stored chain
value says "the conversation starts with exactly these turns" without storing them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: ``(role, text)``; a turn of a tool round has a third member, its calls (an assistant
#: turn: ``[{"id", "name", "input"}]``) or their results (a ``tool`` turn:
#: ``[{"tool_use_id", "content", "is_error"}]``) as canonical JSON (:func:`tool_turn`).
Turn = tuple[str, ...]

USER, ASSISTANT, TOOL = "user", "assistant", "tool"
#: Joins consecutive turns of one role into one stored message.
TURN_JOIN = "\n\n"
#: The text of a tool turn whose results hold none.
NO_OUTPUT = "(no output)"


def canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def tool_turn(role: str, text: str, parts: Sequence[Mapping[str, Any]]) -> Turn:
    """A turn of a tool round: an assistant's ``text`` and calls, or (``role`` tool) the
    results, whose text is theirs joined."""
    if role == TOOL:
        text = TURN_JOIN.join(str(p["content"]) for p in parts if p["content"]) or NO_OUTPUT
    return (role, text, canonical(list(parts)))


def tool_parts(turn: Turn) -> list[dict[str, Any]]:
    """The calls or results of a tool round's turn (none for any other)."""
    return json.loads(turn[2]) if len(turn) > 2 else []


def merged(turns: Iterable[Turn]) -> list[Turn]:
    """``turns`` with consecutive turns of the same role joined (:data:`TURN_JOIN`); a tool
    turn's results join the tool turn before it, a reply's calls stay a turn of their own."""
    out: list[Turn] = []
    for turn in turns:
        last = out[-1] if out else None
        if last is not None and last[0] == turn[0] == TOOL:
            out[-1] = tool_turn(TOOL, "", [*tool_parts(last), *tool_parts(turn)])
        elif last is not None and last[0] == turn[0] and len(last) == len(turn) == 2:
            out[-1] = (turn[0], last[1] + TURN_JOIN + turn[1])
        else:
            out.append(tuple(turn))
    return out


def hash_chain(turns: Sequence[Turn]) -> list[str]:
    """The hex SHA-256 chain of ``turns``: each value hashes the one before and the turn."""
    chain: list[str] = []
    previous = ""
    for turn in turns:
        digest = hashlib.sha256()
        for part in (previous, *turn):
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
