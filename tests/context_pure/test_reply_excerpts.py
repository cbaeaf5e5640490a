"""A reply recalled only for its exchange (found through the message it answers) goes as its
head, so the retrieval room holds more of the conversation; people's own words, and a reply
found by its own words, go whole. A window's later turns show the excerpt exactly as its
first turn did."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatplatform.core.context import (
    AssemblyInputs,
    MessageItem,
    PackingPolicy,
    RetrievedItem,
    assemble,
)
from chatplatform.core.context.sections import WHOLE_REPLIES_SHARE
from chatplatform.core.context.truncate import MARKER

from .helpers import COUNTER, check_invariants

POLICY = PackingPolicy(
    strategy="hybrid",
    context_window=20_000,
    max_context_tokens=20_000,
    reserved_response_tokens=1_000,
    system_budget=100,
    facts_budget=0,
    summaries_budget=0,
    retrieval_budget=6_000,
    min_recent_messages=2,
    recent_message_cap=4,
    retrieval_max_items=50,
    retrieval_neighbors=0,
    reply_excerpt_tokens=40,
)


def turn(seq: int, words: int) -> MessageItem:
    role: Any = "user" if seq % 2 else "assistant"
    return MessageItem(seq, seq, role, " ".join(f"w{seq}x{i}" for i in range(words)))


CHAT = [turn(i, 300 if i % 2 == 0 else 30) for i in range(1, 41)]
NEW = MessageItem(41, 41, "user", "the new question")


def assembled(retrieved: list[RetrievedItem], policy: PackingPolicy = POLICY, **kw: Any) -> Any:
    inputs = AssemblyInputs(new_message=NEW, recent=list(reversed(CHAT)), retrieved=retrieved, **kw)
    result = assemble(policy, inputs, COUNTER)
    check_invariants(policy, inputs, result)
    return result


def test_a_reply_recalled_for_its_exchange_goes_as_its_head() -> None:
    question, reply = CHAT[4], CHAT[5]  # seq 5 (the user's), seq 6 (its reply)
    result = assembled([RetrievedItem(question, 2.0), RetrievedItem(reply, 2.0, excerpt=True)])
    assert result.recalled_ids == (5, 6)
    assert " ".join(question.content.split()) in " ".join(result.system.split())
    assert "w6x0" in result.system and "w6x299" not in result.system
    assert MARKER.split("{n}")[0] in result.system
    cut = next(t for t in result.truncated if t.id == 6)
    assert cut.kind == "excerpt" and cut.kept_tokens <= 40 < cut.original_tokens
    assert result.recalled_excerpt_ids == (6,)


def test_a_reply_found_by_its_own_words_and_a_users_message_go_whole() -> None:
    long_user = MessageItem(7, 7, "user", " ".join(f"u7x{i}" for i in range(300)))
    result = assembled([RetrievedItem(CHAT[5], 2.0), RetrievedItem(long_user, 1.5, excerpt=True)])
    assert "w6x299" in result.system and "u7x299" in result.system
    assert not result.truncated and result.recalled_excerpt_ids == ()


def test_excerpts_off_sends_replies_whole() -> None:
    whole = replace(POLICY, reply_excerpt_tokens=0)
    result = assembled([RetrievedItem(CHAT[5], 2.0, excerpt=True)], whole)
    assert "w6x299" in result.system and result.recalled_excerpt_ids == ()


def test_the_room_an_excerpt_frees_holds_more_finds() -> None:
    finds = [
        RetrievedItem(m, 10.0 - i / 100, excerpt=m.role == "assistant")
        for i, m in enumerate(CHAT[:30])
    ]
    cut = assembled(finds, replace(POLICY, retrieval_budget=2_000))
    whole = assembled(finds, replace(POLICY, retrieval_budget=2_000, reply_excerpt_tokens=0))

    def users(result: Any) -> list[Any]:
        return [i for i in result.recalled_ids if i % 2]

    assert len(users(cut)) > 2 * len(users(whole))


def test_a_kept_window_shows_its_excerpts_as_its_first_turn_did() -> None:
    question, reply = CHAT[4], CHAT[5]
    started = assembled([RetrievedItem(question, 2.0), RetrievedItem(reply, 2.0, excerpt=True)])
    later = MessageItem(43, 43, "user", "a later question")
    messages = [*CHAT, NEW, MessageItem(42, 42, "assistant", "an answer")]
    by_id = {m.id: m for m in messages}
    inputs = AssemblyInputs(
        new_message=later,
        recent=list(reversed(messages)),
        window_start_seq=started.window_start_seq,
        recalled=[by_id[i] for i in started.recalled_ids],
        recalled_excerpts=frozenset(started.recalled_excerpt_ids),
    )
    kept = assemble(POLICY, inputs, COUNTER)
    check_invariants(POLICY, inputs, kept)
    assert kept.window_kept and kept.system == started.system
    assert kept.recalled_excerpt_ids == (6,)


def test_replies_found_by_their_words_go_whole_until_they_fill_their_share() -> None:
    # Ten long replies, each a find of its own words, best first: whole ones take at most
    # their share of the retrieval room, the lower-ranked go as their head, and the room
    # they leave holds people's messages.
    replies = [RetrievedItem(m, 10.0 - i, excerpt=False) for i, m in enumerate(CHAT[1:21:2])]
    people = [RetrievedItem(m, 0.5) for m in CHAT[0:20:2]]
    policy = replace(POLICY, retrieval_budget=6_000)
    result = assembled([*replies, *people], policy)
    cut = {t.id for t in result.truncated if t.kind == "excerpt"}
    whole = [i for i in result.recalled_ids if i % 2 == 0 and i not in cut]
    assert len(whole) >= 2 and whole == [2, 4, 6, 8, 10][: len(whole)]  # the best-ranked
    tokens = {i.id: i.tokens for i in result.included}
    assert sum(tokens[i] for i in whole) <= 6_000 * WHOLE_REPLIES_SHARE
    assert cut and all(i % 2 == 0 for i in cut) and min(cut) > max(whole)
    assert all(m.id in result.recalled_ids for m in CHAT[0:20:2])
    off = assembled([*replies, *people], replace(policy, reply_excerpt_tokens=0))
    assert not off.truncated and not all(m.id in off.recalled_ids for m in CHAT[0:20:2])


def test_an_uncounted_reply_is_reported_for_its_count_once() -> None:
    # Found by its own words, it is counted to see whether it fits the whole replies' room,
    # then again for its line: the recount queue hears of it once.
    reply = CHAT[5]._replace(tokens=None, counted_by=None)
    result = assembled([RetrievedItem(reply, 2.0)])
    assert "w6x299" in result.system
    assert [(r.kind, r.id) for r in result.recounted].count(("message", 6)) == 1


def test_a_new_windows_two_blocks_share_the_whole_replies_room_best_first() -> None:
    # Nothing cached and the trim mark below the retrieval budget: the recalled block (the
    # window's) and the turn's own finds (after the new message) split the retrieval room,
    # and share the whole replies' room. The best-ranked replies go whole in the recalled
    # block as far as it holds them (a share of that block alone cut them after four, while
    # the turn's block sent lower-ranked replies whole), and whole ones stay within their
    # share of the whole retrieval room.
    chat = [turn(i, 300 if i % 2 == 0 else 30) for i in range(1, 201)]
    replies = [RetrievedItem(m, 20.0 - i / 10) for i, m in enumerate(chat[1:161:2])]
    policy = replace(POLICY, retrieval_budget=14_000, history_trim_percent=50)
    inputs = AssemblyInputs(
        new_message=MessageItem(201, 201, "user", "the new question"),
        recent=list(reversed(chat)),
        retrieved=replies,
    )
    result = assemble(policy, inputs, COUNTER)
    check_invariants(policy, inputs, result)
    recalled = set(result.recalled_ids)
    turn_own = {i.id for i in result.included if i.kind == "retrieved"} - recalled
    assert recalled and turn_own  # both blocks hold replies
    cut = {t.id for t in result.truncated if t.kind == "excerpt"}
    ranks = {r.message.id: n for n, r in enumerate(replies)}
    whole_recalled = sorted(ranks[i] for i in recalled - cut)
    assert whole_recalled == list(range(len(whole_recalled))) and len(whole_recalled) > 4
    assert min(ranks[i] for i in cut) == len(whole_recalled)  # the first that did not fit
    tokens = {i.id: i.tokens for i in result.included}
    whole = (recalled | turn_own) - cut
    assert sum(tokens[i] for i in whole) <= 14_000 * WHOLE_REPLIES_SHARE


def test_a_reply_within_the_whole_room_but_not_the_block_goes_as_its_head() -> None:
    # A long message of the user ranks first and takes most of the block; the reply next in
    # rank is within the whole replies' room but no longer fits the block whole: it goes as
    # its head rather than being left out.
    long_user = MessageItem(5, 5, "user", " ".join(f"u5x{i}" for i in range(600)))
    reply = MessageItem(6, 6, "assistant", " ".join(f"w6x{i}" for i in range(250)))
    policy = replace(POLICY, retrieval_budget=3_000)
    result = assembled([RetrievedItem(long_user, 5.0), RetrievedItem(reply, 4.0)], policy)
    tokens = {i.id: i.tokens for i in result.included}
    assert 5 in result.recalled_ids and tokens[5] > 3_000 - 1_000
    assert 6 in result.recalled_ids
    cut = next(t for t in result.truncated if t.id == 6)
    assert cut.kind == "excerpt" and cut.kept_tokens <= 40 < cut.original_tokens
    assert cut.original_tokens <= 3_000 * WHOLE_REPLIES_SHARE
    assert "w6x0" in result.system and "w6x249" not in result.system
