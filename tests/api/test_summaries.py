"""Summaries with their source ranges, and refresh requests."""

from __future__ import annotations

import pytest

from tests.api.conftest import API, error_of
from tests.api.helpers import add_message, add_summary

pytestmark = pytest.mark.django_db


def test_summaries_with_their_source_ranges(client_a, conversation_a, member_a):
    messages = [add_message(conversation_a, member_a, f"m{i}") for i in range(4)]
    summary = add_summary(conversation_a, messages[0], messages[2])
    body = client_a.get(f"{API}/conversations/{conversation_a.pk}/summaries/").json()
    assert len(body["results"]) == 1
    item = body["results"][0]
    assert item["id"] == summary.pk and item["kind"] == "rolling"
    assert (item["first_seq"], item["last_seq"]) == (1, 3)
    assert (item["first_message_id"], item["last_message_id"]) == (
        messages[0].pk,
        messages[2].pk,
    )
    assert item["messages_covered"] == 3 and item["is_current"] is True
    assert item["content"]["summary"] == "They planned."
    history = client_a.get(f"{API}/conversations/{conversation_a.pk}/summaries/?history=true")
    assert len(history.json()["results"]) == 1
    error_of(client_a.get(f"{API}/conversations/{conversation_a.pk}/summaries/?history=often"), 400)


def test_refresh_dispatches_the_task_after_commit(
    client_a, conversation_a, monkeypatch, django_capture_on_commit_callbacks
):
    from summaries import tasks

    sent = []
    monkeypatch.setattr(tasks.refresh_rolling_summary, "delay", lambda *a: sent.append(a))
    url = f"{API}/conversations/{conversation_a.pk}/summaries/refresh/"
    with django_capture_on_commit_callbacks(execute=True):
        response = client_a.post(url)
    assert response.status_code == 202 and response.json() == {"status": "queued"}
    assert sent == [(conversation_a.tenant_id, conversation_a.pk)]


def test_another_tenants_summaries_are_404(client_a, conversation_b, member_b, monkeypatch):
    from summaries import tasks

    sent = []
    monkeypatch.setattr(tasks.refresh_rolling_summary, "delay", lambda *a: sent.append(a))
    first = add_message(conversation_b, member_b, "x")
    add_summary(conversation_b, first, first)
    error_of(client_a.get(f"{API}/conversations/{conversation_b.pk}/summaries/"), 404)
    error_of(client_a.post(f"{API}/conversations/{conversation_b.pk}/summaries/refresh/"), 404)
    assert sent == []


def merged_summaries(conversation, member):
    """Rolling summaries of four sessions a day apart (the service, not fixtures): the second
    session's two chunks merged into one summary of the session, between two current chunks."""
    from datetime import timedelta

    from django.utils import timezone

    from summaries.services import summary_refresh
    from tests.summaries.helpers import add_messages, make_policy

    make_policy(conversation.tenant)
    start = timezone.now() - timedelta(days=3)
    for day, size in enumerate([3, 20, 3, 7]):
        times = [start + timedelta(days=day, minutes=i) for i in range(size)]
        add_messages(conversation, size, user=member, created_at=times)
    summary_refresh(conversation.tenant_id, conversation.pk, now=start + timedelta(days=3))


def test_a_merged_summary_lists_its_sources_with_their_messages_and_dates(
    client_a, conversation_a, member_a
):
    merged_summaries(conversation_a, member_a)
    url = f"{API}/conversations/{conversation_a.pk}/summaries/"
    current = client_a.get(url).json()["results"]
    assert [(s["first_seq"], s["last_seq"], s["level"]) for s in current] == [
        (1, 3, 0),
        (4, 23, 1),
        (24, 26, 0),
    ]
    top = current[1]
    assert top["period_start"] and top["period_end"] > top["period_start"]
    assert [(s["first_seq"], s["last_seq"], s["level"]) for s in top["sources"]] == [
        (4, 13, 0),
        (14, 23, 0),
    ]
    assert all(s["period_start"] and s["period_end"] for s in top["sources"])
    assert sorted(s["id"] for s in top["sources"]) == top["replaced_ids"]
    assert current[2]["sources"] == [] and current[2]["replaced_ids"] == []
    everything = client_a.get(f"{url}?history=true").json()["results"]
    replaced = [s for s in everything if s["merged_into_id"] == top["id"]]
    assert sorted(s["id"] for s in replaced) == top["replaced_ids"]
    assert not any(s["is_current"] for s in replaced)
