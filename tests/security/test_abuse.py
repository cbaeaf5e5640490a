"""Bad input and abuse: empty, blank, NUL, lone UTF-16 surrogate and 10 MB messages over the
REST API and the WebSocket; oversized and malformed frames; policies with negative, zero and
oversized budgets in the admin; WebSocket handshakes with a foreign or missing Origin.

Each gets its clear error (status or code, and a message for people), the WebSocket survives
where it should, and nothing is stored half-way (no message, no turn record, no policy)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import InMemoryChannelLayer, get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from chatplatform.models import ContextPolicy
from chatplatform.models.conversations import Message, TurnRecord
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import conversation_create
from config.asgi import application
from tests.api.conftest import error_of
from tests.factories import policy_form_data

TEN_MB = 10 * 1024 * 1024

#: (label, the JSON text of the content, expected code, expected API status)
BAD_CONTENTS = [
    ("empty", '""', "empty", 400),
    ("whitespace only", '" \\n\\t\\u00a0 "', "empty", 400),
    ("NUL byte", '"nul\\u0000byte"', "invalid", 400),
    ("lone surrogate", '"half \\ud800 a pair"', "invalid", 400),
    ("lone low surrogate", '"\\udc00"', "invalid", 400),
    ("over the policy limit", json.dumps("x" * (64 * 1024 + 1)), "too_large", 413),
    ("10 MB", json.dumps("y" * TEN_MB), "too_large", 413),
    ("not text", "5", "invalid", 400),
]


def stored(tenant: Any) -> tuple[int, int]:
    with tenant_scope(tenant):
        return Message.objects.count(), TurnRecord.objects.count()


@pytest.fixture
def chat(tenant_a, member_a):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="abuse")
    _, raw = api_key_create(tenant=tenant_a, name="k", user=member_a)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return conversation, client


@pytest.mark.django_db(transaction=True)
def test_bad_messages_over_the_api(chat, tenant_a):
    conversation, client = chat
    url = f"/api/v1/conversations/{conversation.pk}/messages/"
    for label, content, code, status in BAD_CONTENTS:
        body = '{"content": ' + content + ', "client_id": "bad-1"}'
        response = client.generic("POST", url, body.encode(), content_type="application/json")
        error = error_of(response, status, code)
        assert len(error["message"]) > 10, (label, error)  # a sentence for people
        assert stored(tenant_a) == (0, 0), label
    # The client id is still free: nothing half-stored claims it.
    ok = client.post(url, {"content": "fine", "client_id": "bad-1"}, format="json")
    assert ok.status_code in (201, 202), ok.content[:300]
    assert ok.json()["message"]["content"] == "fine"


# --- WebSocket -----------------------------------------------------------------------------


def session_cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return str(client.cookies["sessionid"].value)


async def open_socket(
    conversation: Any, user: Any, origin: bytes | None = b"http://testserver"
) -> tuple[WebsocketCommunicator, bool]:
    cookie = await database_sync_to_async(session_cookie)(user)
    headers = [(b"cookie", f"sessionid={cookie}".encode())]
    if origin is not None:
        headers.append((b"origin", origin))
    ws = WebsocketCommunicator(application, f"/ws/conversations/{conversation.pk}/", headers)
    connected, _ = await ws.connect(timeout=10)
    return ws, connected


async def until(ws: WebsocketCommunicator, kind: str) -> list[dict[str, Any]]:
    events = []
    while True:
        event = await ws.receive_json_from(timeout=15)
        events.append(event)
        if event["type"] == kind:
            return events


async def joined_groups() -> set[str]:
    layer = get_channel_layer()
    if isinstance(layer, InMemoryChannelLayer):
        return set(layer.groups)
    import redis.asyncio as redis

    layers: Any = settings.CHANNEL_LAYERS
    prefix = layers["default"].get("CONFIG", {}).get("prefix", "asgi")
    client = redis.Redis.from_url(settings.REDIS_URL, decode_responses=True)
    try:
        channels: list[Any] = await client.pubsub_channels(f"{prefix}*")
    finally:
        await client.aclose()
    return {str(c).split("__group__", 1)[-1] for c in channels if "__group__" in str(c)}


async def ws_turn(conversation: Any, user: Any) -> set[str]:
    """One full turn over a socket; returns the channel-layer groups joined meanwhile (the
    in-memory layer keeps groups of earlier tests' sockets: only new ones count)."""
    before = await joined_groups()
    ws, connected = await open_socket(conversation, user)
    assert connected
    groups = await joined_groups() - before
    await ws.send_json_to({"type": "message", "content": "Hello", "client_id": "turn-1"})
    assert (await until(ws, "done"))[-1]["status"] == "complete"
    await ws.send_json_to({"type": "stop"})
    await ws.disconnect()
    return {g for g in groups if g.startswith("conv.")}


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_bad_frames_get_clear_errors_and_the_socket_survives(tenant_a, member_a):
    conversation = await database_sync_to_async(conversation_create)(
        tenant=tenant_a, created_by=member_a, title="ws abuse"
    )
    ws, connected = await open_socket(conversation, member_a)
    assert connected
    frames: list[tuple[str, str]] = [
        (f'{{"type": "message", "client_id": "c{n}", "content": {content}}}', code)
        for n, (_label, content, code, _status) in enumerate(BAD_CONTENTS)
        if len(content) < 1024 * 1024  # the 10 MB one is a frame over the limit, below
    ]
    frames += [
        ('{"type": "message", "content": "' + "z" * (2 * 1024 * 1024) + '"}', "too_large"),
        ('{"type": "message", "content": "' + "z" * TEN_MB + '"}', "too_large"),
        ("{not json", "invalid_json"),
        ('{"type": "message", "content": "unterminated', "invalid_json"),
        ("[1, 2, 3]", "invalid"),
        ('"just a string"', "invalid"),
        ('{"type": "message", "content": "ok", "client_id": ""}', "invalid"),
        ('{"type": "message", "content": "ok", "client_id": "' + "k" * 65 + '"}', "invalid"),
        ('{"type": "message", "content": "ok", "reply_to": "abc"}', "invalid"),
        ('{"type": "resume"}', "invalid"),
        ('{"type": "dance"}', "unknown_type"),
    ]
    for text, code in frames:
        await ws.send_to(text_data=text)
        answer = await ws.receive_json_from(timeout=10)
        assert answer["type"] == "error" and answer["code"] == code, (text[:80], answer)
        assert isinstance(answer["message"], str) and len(answer["message"]) > 10, answer
    await ws.send_to(bytes_data=b"\x00\x01binary")
    answer = await ws.receive_json_from(timeout=10)
    assert answer["code"] == "invalid" and "JSON text" in answer["message"]
    assert await database_sync_to_async(stored)(tenant_a) == (0, 0)
    # Still open, and still works: the first real message gets its reply.
    await ws.send_json_to({"type": "message", "content": "still here?", "client_id": "c0"})
    events = await until(ws, "done")
    assert events[0]["type"] == "ack" and events[-1]["status"] == "complete"
    await ws.disconnect()
    assert await database_sync_to_async(stored)(tenant_a) == (2, 1)


# --- Origin -----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
@pytest.mark.parametrize(
    "origin",
    [
        b"http://evil.example",
        None,
        b"null",
        b"",
        b"http://testserver.evil.example",
        b"http://eviltestserver",
        b"http://evil.example/http://testserver",
        b"file://",
    ],
    ids=["foreign", "missing", "null", "empty", "suffix", "prefix", "path", "file"],
)
async def test_handshakes_with_a_foreign_or_missing_origin_are_rejected(tenant_a, member_a, origin):
    conversation = await database_sync_to_async(conversation_create)(
        tenant=tenant_a, created_by=member_a, title="origin"
    )
    _ws, connected = await open_socket(conversation, member_a, origin=origin)
    assert not connected
    assert not {g for g in await joined_groups() if g.endswith(f".c{conversation.pk}")}
    # An API key does not bypass the check either.
    _, raw = await database_sync_to_async(api_key_create)(tenant=tenant_a, name="k", user=member_a)
    headers = [] if origin is None else [(b"origin", origin)]
    keyed = WebsocketCommunicator(
        application, f"/ws/conversations/{conversation.pk}/", headers, [f"apikey.{raw}"]
    )
    connected, _ = await keyed.connect(timeout=10)
    assert not connected
    ok, connected = await open_socket(conversation, member_a)
    assert connected  # the same user with the right Origin gets in
    await ok.disconnect()


# --- policies ----------------------------------------------------------------------------------


BUDGET_FIELDS = [
    "max_context_tokens",
    "reserved_response_tokens",
    "system_budget",
    "instructions_budget",
    "facts_budget",
    "summaries_budget",
    "retrieval_budget",
    "summary_max_tokens",
    "recent_summary_tokens",
    "long_summary_tokens",
    "max_message_chars",
    "user_messages_per_minute",
]
ZERO_ALLOWED = {  # off
    "system_budget",
    "instructions_budget",
    "facts_budget",
    "summaries_budget",
    "retrieval_budget",
}


@pytest.mark.django_db
def test_policies_with_negative_zero_and_oversized_budgets_are_refused(client, tenant_a, admin_a):
    client.force_login(admin_a)
    url = reverse("admin:chatplatform_contextpolicy_add")
    cases: list[tuple[str, Any]] = [(f, -1) for f in BUDGET_FIELDS]
    cases += [(f, 0) for f in BUDGET_FIELDS if f not in ZERO_ALLOWED]
    cases += [(f, 10**12) for f in BUDGET_FIELDS]
    cases += [(f, "lots") for f in ("max_context_tokens", "system_budget")]
    problems = []
    for field, value in cases:
        response = client.post(url, policy_form_data(tenant_a, name="abusive", **{field: value}))
        if response.status_code != 200:
            problems.append(f"{field}={value}: answered {response.status_code}")
            with tenant_scope(tenant_a):
                ContextPolicy.objects.filter(name="abusive").delete()
            continue
        form = response.context["adminform"].form
        errors = form.errors.get(field) or form.errors.get("__all__")
        if not errors:
            problems.append(f"{field}={value}: no error on the field ({dict(form.errors)})")
        elif not all(isinstance(e, str) and len(e) > 10 for e in errors):
            problems.append(f"{field}={value}: unclear error {errors}")
    assert not problems, "\n".join(problems)
    with tenant_scope(tenant_a):
        assert not ContextPolicy.objects.filter(name="abusive").exists()
    # The form itself is fine: the same data with sane budgets saves.
    assert client.post(url, policy_form_data(tenant_a, name="abusive")).status_code == 302
