"""Tenant B attacks every WebSocket route (walked from ``config.routing``) with tenant A's
ids, by session and by API key: the socket is closed with the same code as for a conversation
that does not exist. Inside B's own conversation, frames naming A's messages get the same
errors as frames naming missing ones. Nothing of A's changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.urls import URLPattern

from config.asgi import application
from config.routing import websocket_urlpatterns
from tests.security import matrix
from tests.security.conftest import MARKER, Attack, World, snapshot

ORIGIN = (b"origin", b"http://testserver")

#: WebSocket route pattern -> how to fill its kwargs with the target world's ids.
WS_CASES: dict[str, Callable[[World], dict[str, Any]]] = {
    "ws/conversations/<int:conversation_id>/": lambda t: {"conversation_id": t["conversation"]},
}

#: Frames sent inside B's own conversation that name A's objects: (frame, the reply's type).
FRAMES: list[Callable[[World], dict[str, Any]]] = [
    lambda t: {"type": "resume", "message_id": t["reply"], "last_seq": 0},
    lambda t: {"type": "resume", "message_id": t["message"], "last_seq": 0},
    lambda t: {"type": "message", "content": "quoting", "reply_to": t["message"]},
    lambda t: {"type": "message", "content": "quoting", "reply_to": t["reply"]},
    lambda t: {"type": "regenerate", "message_id": t["reply"]},
    lambda t: {"type": "edit", "message_id": t["message"], "content": "taken"},
]


def ws_routes() -> list[str]:
    return [str(p.pattern) for p in websocket_urlpatterns if isinstance(p, URLPattern)]


def test_every_websocket_route_has_a_case():
    unknown = sorted(set(ws_routes()) - set(WS_CASES))
    assert not unknown, (
        f"WebSocket routes without a cross-tenant case: {unknown}; add them to WS_CASES in "
        "tests/security/test_ws_matrix.py"
    )


def credentials(attack: Attack) -> dict[str, tuple[list[tuple[bytes, bytes]], list[str]]]:
    session = attack.session().cookies["sessionid"].value
    return {
        "B session": ([(b"cookie", f"sessionid={session}".encode()), ORIGIN], []),
        "B admin key": ([ORIGIN], ["chatplatform.v1", f"apikey.{attack.key_b}"]),
        "B member key": ([ORIGIN], [f"apikey.{attack.member_key_b}"]),
    }


async def connect(path: str, headers: Any, subprotocols: list[str]) -> tuple[Any, bool, Any]:
    ws = WebsocketCommunicator(application, path, headers=headers, subprotocols=subprotocols)
    connected, code = await ws.connect(timeout=5)
    return ws, connected, code


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_foreign_conversations_close_like_missing_ones(attack):
    before = await database_sync_to_async(snapshot)(attack.a)
    creds = await database_sync_to_async(credentials)(attack)
    failures = []
    for route, kwargs in WS_CASES.items():
        for who, (headers, protocols) in creds.items():
            theirs = await connect(matrix.fill(route, kwargs(attack.a)), headers, protocols)
            missing = await connect(matrix.fill(route, kwargs(attack.missing)), headers, protocols)
            own = await connect(matrix.fill(route, kwargs(attack.b)), headers, protocols)
            if theirs[1] or missing[1]:
                failures.append(f"{route} as {who}: a socket for A's conversation was accepted")
            if theirs[2] != missing[2] or theirs[2] != 4404:
                failures.append(f"{route} as {who}: close codes {theirs[2]} vs {missing[2]}")
            assert own[1], f"{who} cannot even open B's own conversation"
            await own[0].disconnect()
    assert not failures, "\n".join(failures)
    assert await database_sync_to_async(snapshot)(attack.a) == before


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_frames_naming_foreign_objects_answer_like_missing_ones(attack):
    before = await database_sync_to_async(snapshot)(attack.a)
    creds = await database_sync_to_async(credentials)(attack)
    headers, protocols = creds["B session"]
    path = f"/ws/conversations/{attack.b['conversation']}/"
    ws, connected, _ = await connect(path, headers, protocols)
    assert connected
    for frame in FRAMES:
        answers = []
        for target in (attack.a, attack.missing):
            await ws.send_json_to(frame(target))
            answer = await ws.receive_json_from(timeout=5)
            assert MARKER not in str(answer).lower()
            answers.append(answer)
        assert answers[0] == answers[1], (frame(attack.a), answers)
        assert answers[0]["type"] == "error", answers[0]
    assert await ws.receive_nothing(timeout=0.2)
    await ws.disconnect()
    assert await database_sync_to_async(snapshot)(attack.a) == before
