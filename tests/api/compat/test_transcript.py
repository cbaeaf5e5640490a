"""A client's messages as turns, and which of them a conversation holds (pure)."""

from __future__ import annotations

from typing import Any

from chats.api.compat.transcript import hash_chain, known_turns, merged

TURNS = [("user", "a"), ("assistant", "b"), ("user", "c")]


def test_consecutive_turns_of_one_role_are_one_message():
    assert merged([("user", "a"), ("user", "b"), ("assistant", "c")]) == [
        ("user", "a\n\nb"),
        ("assistant", "c"),
    ]


def test_the_chain_names_each_prefix_and_tells_the_parts_apart():
    chain = hash_chain(TURNS)
    assert len(set(chain)) == 3
    assert hash_chain(TURNS[:2]) == chain[:2]
    assert hash_chain([("user", "ab")]) != hash_chain([("user", "a"), ("user", "b")])[:1]
    assert hash_chain([("user", "x")])[0] != hash_chain([("assistant", "x")])[0]


def test_a_history_continues_what_its_record_and_the_stored_turns_say():
    turns = [*TURNS, ("assistant", "d"), ("user", "e")]
    chain = hash_chain(turns)
    record: dict[str, Any] = {"count": 3, "fingerprint": chain[2]}
    assert known_turns(turns, chain, stored_after=[("assistant", "d")], **record) == 4
    # The stored reply differs from the client's copy, or the client lacks a stored turn.
    assert known_turns(turns, chain, stored_after=[("assistant", "D")], **record) is None
    more = [("assistant", "d"), ("user", "e"), ("assistant", "f")]
    assert known_turns(turns, chain, stored_after=more, **record) is None
    # Another start.
    assert known_turns(turns, chain, count=3, fingerprint="0" * 64, stored_after=[]) is None
    # The same request sent again: held whole only as a resend.
    same = hash_chain(TURNS)
    answered: dict[str, Any] = {
        "count": 3,
        "fingerprint": same[2],
        "stored_after": [("assistant", "d")],
    }
    assert known_turns(TURNS, same, **answered) is None
    assert known_turns(TURNS, same, resend=True, **answered) == 3
