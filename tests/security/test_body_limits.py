"""Request body limits: a message with an image of up to 5 MB (base64 in JSON, as the API
documents it) is accepted; anything larger is refused with 413 ``too_large`` in the API's error
format, storing nothing; and the ASGI server refuses an oversized body before reading it (a
``Content-Length`` over the limit at once, a chunked body as soon as it passes the limit,
before any authentication work). Checked through the test client, on a live uvicorn with raw
HTTP, and on a production start (the Procfile's command, ``DEBUG`` off)."""

from __future__ import annotations

import base64
import json
import select
import socket
import struct
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from chatplatform.bruteforce import _counter_key
from chatplatform.models.conversations import Message
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import tenant_scope
from chats.images import MAX_IMAGE_BASE64_CHARS, MAX_IMAGE_BYTES
from chats.services import conversation_create
from tests.api.conftest import error_of
from tests.deploy.test_production_start import production_server  # noqa: F401  (fixture)
from tests.factories import make_member, make_tenant
from tests.scale.processes import free_port, wait_until

MB = 1_000_000
API_LIMIT = 8 * 1024 * 1024
CHUNK = 64 * 1024


def png_of(size: int) -> bytes:
    """A PNG of exactly ``size`` bytes (a valid header; the rest a text chunk)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    head = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 640, 480, 8, 2, 0, 0, 0))
    padding = size - len(head) - 12 - 12
    return head + chunk(b"tEXt", b"x" * padding) + chunk(b"IEND", b"")


def image_body(size: int, content: str = "What is in this picture?") -> dict[str, Any]:
    data = base64.b64encode(png_of(size)).decode()
    return {"content": content, "image": {"media_type": "image/png", "data": data}}


def messages_url(conversation_id: int) -> str:
    return f"/api/v1/conversations/{conversation_id}/messages/"


def stored(tenant: Any) -> int:
    with tenant_scope(tenant):
        return Message.objects.count()


# --- Through the test client ------------------------------------------------------------------


@pytest.fixture
def client_a(tenant_a: Any, member_a: Any) -> APIClient:
    client = APIClient()
    key = api_key_create(tenant=tenant_a, name="member a", user=member_a)[1]
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("size", [int(1.7 * MB), 3 * MB, MAX_IMAGE_BYTES])
def test_a_message_with_an_image_up_to_5_mb_is_accepted(size, client_a, conversation_a):
    response = client_a.post(messages_url(conversation_a.pk), image_body(size), format="json")
    assert response.status_code == 201, response.content[:500]
    assert response.json()["message"]["image"]["size"] == size


def test_the_api_limit_holds_the_largest_message_in_its_most_verbose_json():
    """The largest image as base64 beside the longest text, every character escaped as JSON
    escapes it at most (a surrogate pair per character), fits under the default limit."""
    from django.conf import settings

    longest_text = json.dumps({"content": "\U0001f600" * settings.CHAT_MAX_MESSAGE_CHARS})
    image = json.dumps({"image": {"media_type": "image/png", "data": "A" * MAX_IMAGE_BASE64_CHARS}})
    assert len(longest_text) + len(image) + 200 < settings.API_MAX_BODY_BYTES == API_LIMIT


@pytest.mark.django_db(transaction=True)
def test_a_7_mb_message_is_413_too_large_and_nothing_is_stored(client_a, conversation_a):
    before = stored(conversation_a.tenant)
    response = client_a.post(
        messages_url(conversation_a.pk), {"content": "x" * (7 * MB)}, format="json"
    )
    error_of(response, 413, "too_large")
    assert stored(conversation_a.tenant) == before


@pytest.mark.django_db(transaction=True)
def test_a_body_over_the_api_limit_is_413_too_large(client_a, conversation_a, settings):
    settings.API_MAX_BODY_BYTES = 3 * MB
    before = stored(conversation_a.tenant)
    response = client_a.post(messages_url(conversation_a.pk), image_body(3 * MB), format="json")
    error_of(response, 413, "too_large")
    assert stored(conversation_a.tenant) == before


@pytest.mark.django_db(transaction=True)
def test_an_unknown_field_is_refused_not_read_for_nothing(client_a, conversation_a):
    before = stored(conversation_a.tenant)
    body = {"content": "hello", "attachment_notes": "y" * (2 * MB)}
    error = error_of(client_a.post(messages_url(conversation_a.pk), body, format="json"), 400)
    assert error["code"] == "invalid"
    assert error["fields"] == {"attachment_notes": ["Unknown field."]}
    assert stored(conversation_a.tenant) == before


def test_djangos_form_data_limit_is_a_413_not_a_500():
    """Should a body ever meet Django's own limit (form data), the API says 413 too_large."""
    from django.core.exceptions import RequestDataTooBig

    from chats.api.errors import exception_handler

    response = exception_handler(RequestDataTooBig("too big"), {})
    assert response.status_code == 413
    assert response.data["error"]["code"] == "too_large"


# --- Raw HTTP to a live uvicorn ---------------------------------------------------------------


@pytest.fixture
def live_port(transactional_db: None) -> Iterator[int]:
    """uvicorn serving the ASGI application in this process (same settings, cache and
    database), on a free port."""
    import uvicorn

    from config.asgi import application

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            application, host="127.0.0.1", port=port, log_level="warning", lifespan="off"
        )
    )
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    wait_until(lambda: server.started, 30, "uvicorn")
    yield port
    server.should_exit = True
    thread.join(10)


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of the one response on ``sock`` (read until it closes)."""
    data = b""
    while True:
        try:
            piece = sock.recv(65536)
        except ConnectionResetError:
            break
        if not piece:
            break
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


def headers_only(port: int, path: str, length: int, extra: str = "") -> socket.socket:
    """A POST that declares ``length`` bytes of body and sends none of them."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n{extra}\r\n"
        ).encode()
    )
    return sock


def chunked_until_answered(port: int, path: str, total: int, extra: str = "") -> socket.socket:
    """A chunked POST of up to ``total`` bytes, sent until the server answers."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Transfer-Encoding: chunked\r\n{extra}\r\n"
        ).encode()
    )
    sent = 0
    piece = f"{CHUNK:x}\r\n".encode() + b"x" * CHUNK + b"\r\n"
    while sent < total:
        answered, _, _ = select.select([sock], [], [], 0)
        if answered:
            return sock
        try:
            sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            return sock
        sent += CHUNK
    sock.sendall(b"0\r\n\r\n")
    return sock


GIB = 1024**3


@pytest.mark.parametrize("path", ["/api/v1/conversations/1/messages/", "/api/v1/nothing/"])
def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_sent(live_port, path):
    """The server answers 413 to the headers alone: it never waits for the gigabyte."""
    with headers_only(live_port, path, GIB) as sock:
        status, headers, body = read_response(sock)
    assert status == 413
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert error["code"] == "too_large" and f"{API_LIMIT:,}" in error["message"]


def test_a_declared_length_over_the_limit_is_refused_on_pages_too(live_port, settings):
    settings.REQUEST_MAX_BODY_BYTES = 1000
    with headers_only(live_port, "/accounts/login/", 1001) as sock:
        status, headers, body = read_response(sock)
    assert status == 413
    assert headers["content-type"].startswith("text/plain")
    assert b"1,000 bytes" in body


def test_expect_continue_over_the_limit_is_refused_without_asking_for_the_body(live_port):
    with headers_only(
        live_port, "/api/v1/conversations/1/messages/", GIB, "Expect: 100-continue\r\n"
    ) as sock:
        status, _, body = read_response(sock)
    assert status == 413  # not "100 Continue"
    assert json.loads(body)["error"]["code"] == "too_large"


def test_a_chunked_body_is_cut_off_at_the_limit_before_authentication(live_port, settings):
    """9 MB without a length: 413 once it passes the limit, and the bad API key it carries
    was never looked up (no failed look-up counted for the address)."""
    counter = _counter_key("127.0.0.1")
    cache.delete(counter)
    with chunked_until_answered(
        live_port,
        "/api/v1/conversations/1/messages/",
        9 * MB,
        "Authorization: Bearer not-a-key\r\n",
    ) as sock:
        status, _, body = read_response(sock)
    assert status == 413
    assert json.loads(body)["error"]["code"] == "too_large"
    assert cache.get(counter) is None


def test_a_body_within_the_limit_passes_through(live_port, settings):
    """The limit counts, it does not cut: a request just under it is read and answered by the
    application (here: an unknown key, 401)."""
    settings.API_MAX_BODY_BYTES = 100_000
    body = json.dumps({"content": "x" * 99_000}).encode()
    response = httpx.post(
        f"http://127.0.0.1:{live_port}/api/v1/me/",
        content=body,
        headers={"Authorization": "Bearer not-a-key", "Content-Type": "application/json"},
        timeout=30,
        trust_env=False,
    )
    assert response.status_code == 401, response.text


# --- A production start -----------------------------------------------------------------------


def test_production_start_takes_5_mb_images_and_refuses_larger_bodies(
    production_server: str,  # noqa: F811
    presets: None,
) -> None:
    tenant = make_tenant("Limits")
    member = make_member(tenant, username="limits-member")
    conversation = conversation_create(tenant=tenant, created_by=member, title="Pictures")
    _, key = api_key_create(tenant=tenant, name="limits", user=member)
    api = httpx.Client(
        base_url=production_server,
        timeout=60,
        trust_env=False,
        headers={"Authorization": f"Bearer {key}", "X-Forwarded-Proto": "https"},
    )
    url = messages_url(conversation.pk)
    for size in (int(1.7 * MB), int(4.9 * MB)):
        sent = api.post(url, json=image_body(size))
        assert sent.status_code == 201, (size, sent.status_code, sent.text[:500])
    before = stored(tenant)

    too_long = api.post(url, json={"content": "x" * (7 * MB)})
    assert too_long.status_code == 413 and too_long.json()["error"]["code"] == "too_large"
    unknown = api.post(url, json={"content": "x", "notes": "y" * (2 * MB)})
    assert unknown.status_code == 400, unknown.text[:500]

    def nine_megabytes() -> Iterator[bytes]:
        for _ in range(9):
            yield b"x" * MB

    try:
        chunked = api.post(url, content=nine_megabytes())
        assert chunked.status_code == 413, chunked.text[:500]
    except httpx.TransportError:
        # The server closed the connection after its 413, while the rest was being sent.
        pass
    port = int(production_server.rsplit(":", 1)[1])
    with chunked_until_answered(port, url, 9 * MB) as sock:
        assert read_response(sock)[0] == 413
    with headers_only(port, url, GIB, "X-Forwarded-Proto: https\r\n") as sock:
        status, _, body = read_response(sock)
    assert status == 413 and json.loads(body)["error"]["code"] == "too_large"
    assert stored(tenant) == before
