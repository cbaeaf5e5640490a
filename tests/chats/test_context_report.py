"""The context report a provider receives describes the prompt that was sent, in the same
terms as the context meter of that turn: messages by their seq number and an excerpt (never
a database id), and retrieved messages the history already showed as left out, duplicates."""

from __future__ import annotations

import re

import pytest

from chatplatform.core.llm.offline_provider import render_reply
from chatplatform.core.tokens.bpe import BpeCounter
from chats.assembly import assemble_turn
from chats.assembly.records import breakdown
from chats.assembly.request import chat_request
from chats.ui.meter import meter_from_breakdown
from memory.services import fact_save
from tests.factories import make_policy
from tests.retrieval.conftest import add

pytestmark = pytest.mark.django_db

COUNTER = BpeCounter("o200k_base")


def hybrid_policy(tenant, **overrides):
    options = {
        "name": "hybrid small",
        "strategy": "hybrid",
        "max_context_tokens": 2000,
        "reserved_response_tokens": 500,
        "system_budget": 300,
        "facts_budget": 200,
        "summaries_budget": 0,
        "retrieval_budget": 600,
        "min_recent_messages": 2,
        "recent_message_cap": 10,
        "retrieval_max_items": 20,
    }
    return make_policy(tenant, **{**options, **overrides})


def no_bare_ids(reply: str, *messages) -> None:
    for message in messages:
        assert not re.search(rf"(^|\s)- {message.pk}$", reply, re.M), reply


def test_a_retrieved_old_message_is_named_by_its_seq_and_an_excerpt(
    conversation, tenant_a, member_a
):
    (old,) = add(conversation, member_a, "My locker code is 4711, do not forget it.")
    filler = add(
        conversation, member_a, *[f"Small talk {i}: the weather is fine." for i in range(60)]
    )
    (new,) = add(conversation, member_a, "What was my locker code again?")
    turn = assemble_turn(conversation, new, policy=hybrid_policy(tenant_a))

    report = chat_request(turn, tools=False).context_report
    assert report is not None
    assert old.seq in {m.seq for m in report.retrieved}
    recalled = next(m for m in report.retrieved if m.seq == old.seq)
    assert recalled.excerpt.startswith("My locker code is 4711")
    assert report.history is not None and report.history[1] == new.seq - 1
    retrieval = report.section("retrieval")
    assert retrieval is not None and len(report.retrieved) == min(retrieval.items, 10)

    reply = render_reply(chat_request(turn, tools=False), COUNTER)
    # By seq, speaker and excerpt (the speaker is the person's label retrieval shows).
    assert re.search(
        rf'^- #{old.seq} [^\n]*@{member_a.username}\): "My locker code is 4711', reply, re.M
    )
    assert f"#{new.seq - 1}." in reply  # the history's last message
    history = report.section("history")
    assert history is not None
    assert f"Recent messages I saw word for word: {history.items} messages" in reply
    no_bare_ids(reply, old, *filler)


def test_retrieved_messages_the_history_showed_are_left_out_as_the_meter_says(
    conversation, tenant_a, member_a
):
    fact_save(tenant_a, member_a, "likes green tea")
    said = add(
        conversation,
        member_a,
        "We talked about the paella recipe with saffron.",
        "The paella needs a wide pan.",
    )
    (new,) = add(conversation, member_a, "Tell me about the paella again")
    turn = assemble_turn(conversation, new, policy=hybrid_policy(tenant_a))
    meter = meter_from_breakdown(breakdown(turn))
    duplicates = next(g for g in meter["excluded"] if g["reason"] == "duplicate")
    assert duplicates["kinds"].get("retrieved", 0) >= 1  # retrieval found what history holds

    request = chat_request(turn, tools=False)
    report = request.context_report
    assert report is not None and report.retrieved == ()
    left_out = {(row.kind, row.reason): row.count for row in report.left_out}
    assert left_out[("retrieved", "duplicate")] == duplicates["kinds"]["retrieved"]
    assert sum(left_out.values()) == sum(g["count"] for g in meter["excluded"])
    assert report.facts == ("likes green tea",)

    reply = render_reply(request, COUNTER)
    count = duplicates["kinds"]["retrieved"]
    noun = "retrieved message" if count == 1 else "retrieved messages"
    assert f"- {count} {noun}: duplicate of an item already included" in reply
    assert "Earlier messages recalled as relevant: none." in reply
    assert f"#{said[0].seq} to #{said[-1].seq}" in reply
    assert "- likes green tea" in reply
    no_bare_ids(reply, *said)
