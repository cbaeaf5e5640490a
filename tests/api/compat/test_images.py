"""Images through the SDK-compatible API: inline (data URLs, base64 blocks) checked as every
image is, by URL fetched only from the operator's image hosts, at the address that was
checked, and one image on the new message, which the model is shown."""

from __future__ import annotations

import base64
import struct
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anthropic
import openai
import pytest

from chatplatform.core.llm.base import ImagePart
from chatplatform.core.llm.offline_provider import OfflineProvider
from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.image_urls import fetch_image
from chats.images import MAX_IMAGE_BYTES, ImageRejected
from chats.replies import runner
from tests.api.compat.test_anthropic_sdk import sdk_for
from tests.api.compat.test_openai_sdk import client
from tests.factories import make_policy, offline_profile

#: A 40x30 PNG header: enough for the checks, which read only the header.
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + struct.pack(">II", 40, 30) + b"\x08\x02\0\0\0"
DATA_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


class ImageServer(BaseHTTPRequestHandler):
    """``/cat.png`` the image, ``/moved`` a redirect, ``/huge`` too big, else 404; each
    request's ``Host`` header is recorded."""

    hosts: list[str] = []

    def do_GET(self) -> None:
        self.hosts.append(self.headers.get("Host", ""))
        if self.path == "/cat.png":
            self._send(200, PNG)
        elif self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/cat.png")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/huge":
            self._send(200, PNG + b"\0" * MAX_IMAGE_BYTES)
        else:
            self._send(404, b"no")

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def image_host(settings) -> Iterator[str]:
    """A local image server on the operator's list of image hosts (http and loopback allowed
    here, as a test must)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), ImageServer)
    ImageServer.hosts = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.IMAGE_URL_HOSTS = ["127.0.0.1", "images.example.test"]
    settings.IMAGE_URL_ALLOW_HTTP = True
    settings.IMAGE_URL_ALLOW_PRIVATE_NETWORKS = True
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def seen() -> list[Any]:
    """The model requests of the turns the live server answers (after ``live_url``)."""
    requests: list[Any] = []

    def provider(prepared: Any) -> OfflineProvider:
        requests.append(prepared.request)
        return OfflineProvider(delay=0.002)

    runner.provider_factory_set(provider)
    return requests


@pytest.fixture
def vision(tenant_a) -> None:
    """The tenant's model is the offline one, seeing images."""
    profile = offline_profile()
    profile.pk, profile.tenant, profile.name, profile.supports_vision = None, tenant_a, "eyes", True
    with tenant_scope(tenant_a):
        profile.save()
    make_policy(tenant_a, activate=True, model_profile=profile)


def stored_images(tenant, conversation_id: int) -> list[tuple[str, bytes | None]]:
    with tenant_scope(tenant):
        messages = Message.objects.filter(conversation_id=conversation_id).order_by("seq")
        return [(m.content, m.attachment.read() if m.attachment else None) for m in messages]


def image_parts(request: Any) -> list[ImagePart]:
    return [
        part
        for message in request.messages
        if not isinstance(message.content, str)
        for part in message.content
        if isinstance(part, ImagePart)
    ]


@pytest.mark.django_db(transaction=True)
def test_an_openai_data_url_image_is_stored_and_shown_to_the_model(
    live_url, seen, vision, key_a, tenant_a
):
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": DATA_URL, "detail": "auto"}},
    ]
    raw = client(live_url, key_a).chat.completions.with_raw_response.create(
        model="m",
        messages=[
            # An earlier turn's image is history: not fetched, not the new message's.
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
            {"role": "assistant", "content": "A picture."},
            {"role": "user", "content": content},
        ],
    )
    conversation_id = int(raw.headers["x-conversation-id"])
    messages = stored_images(tenant_a, conversation_id)
    assert messages[-2] == ("What is this?", PNG)
    assert messages[:2] == [("[content without text, not kept]", None), ("A picture.", None)]
    assert [base64.b64decode(p.data) for p in image_parts(seen[-1])] == [PNG]


@pytest.mark.django_db(transaction=True)
def test_an_anthropic_base64_image_is_stored(live_url, key_a, tenant_a):
    block = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": DATA_URL.split(",")[1]},
    }
    raw = sdk_for(live_url, key_a).messages.with_raw_response.create(
        model="m",
        max_tokens=64,
        messages=[{"role": "user", "content": [block, {"type": "text", "text": "Describe"}]}],
    )
    conversation_id = int(raw.headers["x-conversation-id"])
    assert stored_images(tenant_a, conversation_id)[0] == ("Describe", PNG)


@pytest.mark.django_db(transaction=True)
def test_an_image_url_is_fetched_from_the_operators_image_hosts(
    live_url, image_host, key_a, tenant_a
):
    block = {"type": "image", "source": {"type": "url", "url": f"{image_host}/cat.png"}}
    raw = sdk_for(live_url, key_a).messages.with_raw_response.create(
        model="m", max_tokens=64, messages=[{"role": "user", "content": [block]}]
    )
    conversation_id = int(raw.headers["x-conversation-id"])
    assert stored_images(tenant_a, conversation_id)[0] == ("", PNG)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("url", "hosts", "says"),
    [
        ("https://images.example.test/cat.png", [], "does not fetch images by URL"),
        ("https://169.254.169.254/latest/meta-data", ["*.example.test"], "not on the operator"),
        ("data:image/png;base64,bm90IGFuIGltYWdl", ["*.example.test"], "not a PNG"),
        ("data:text/plain,hello", [], "data URL must be"),
    ],
)
def test_an_image_refused_is_a_400_and_nothing_is_stored(
    live_url, settings, key_a, tenant_a, url, hosts, says
):
    settings.IMAGE_URL_HOSTS = hosts
    content = [{"type": "text", "text": "See"}, {"type": "image_url", "image_url": {"url": url}}]
    with pytest.raises(openai.BadRequestError) as refused:
        client(live_url, key_a).chat.completions.create(
            model="m", messages=[{"role": "user", "content": content}]
        )
    assert says in refused.value.body["message"]  # type: ignore[index]
    with tenant_scope(tenant_a):
        assert not Conversation.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_new_message_holds_one_image(live_url, key_a, tenant_a):
    image = {"type": "image_url", "image_url": {"url": DATA_URL}}
    with pytest.raises(openai.BadRequestError) as refused:
        client(live_url, key_a).chat.completions.create(
            model="m",
            messages=[
                {"role": "user", "content": [image]},
                {"role": "user", "content": [image, {"type": "text", "text": "Compare"}]},
            ],
        )
    assert "2 images" in refused.value.body["message"]  # type: ignore[index]
    with tenant_scope(tenant_a):
        assert not Message.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_count_tokens_counts_the_new_messages_image(live_url, vision, key_a):
    sdk = sdk_for(live_url, key_a)
    text = [{"type": "text", "text": "What is this?"}]
    block = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": DATA_URL.split(",")[1]},
    }
    plain = sdk.messages.count_tokens(model="m", messages=[{"role": "user", "content": text}])
    with_image = sdk.messages.count_tokens(
        model="m", messages=[{"role": "user", "content": [*text, block]}]
    )
    assert with_image.input_tokens > plain.input_tokens
    with pytest.raises(anthropic.BadRequestError):
        sdk.messages.count_tokens(
            model="m", messages=[{"role": "user", "content": [{"type": "document"}]}]
        )


# --- the fetch itself ---------------------------------------------------------------------


def test_the_fetch_goes_to_the_address_that_was_checked(image_host):
    port = image_host.rsplit(":", 1)[1]
    # The name does not resolve anywhere: only the checked address can be reached.
    data, info = fetch_image(
        f"http://images.example.test:{port}/cat.png", resolver=lambda host, port: ["127.0.0.1"]
    )
    assert data == PNG and (info.width, info.height) == (40, 30)
    assert ImageServer.hosts == [f"images.example.test:{port}"]


@pytest.mark.parametrize(
    ("path", "says"),
    [("/moved", "HTTP 302"), ("/missing", "HTTP 404"), ("/huge", "larger than")],
)
def test_a_fetch_that_does_not_give_an_image_is_refused(image_host, path, says):
    with pytest.raises(ImageRejected, match=says):
        fetch_image(image_host + path)


def test_an_image_host_resolving_to_a_private_address_is_refused(image_host, settings):
    settings.IMAGE_URL_ALLOW_PRIVATE_NETWORKS = False
    with pytest.raises(ImageRejected, match="private or reserved"):
        fetch_image("http://images.example.test/cat.png", resolver=lambda host, port: ["10.0.0.7"])


@pytest.mark.django_db(transaction=True)
def test_a_responses_input_image_is_stored_and_shown_to_the_model(
    live_url, seen, vision, key_a, tenant_a
):
    sdk = client(live_url, key_a)
    raw = sdk.responses.with_raw_response.create(
        model="m",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {"type": "input_image", "image_url": DATA_URL, "detail": "auto"},
                ],
            }
        ],
    )
    conversation_id = int(raw.headers["x-conversation-id"])
    assert stored_images(tenant_a, conversation_id)[0] == ("What is this?", PNG)
    assert [base64.b64decode(p.data) for p in image_parts(seen[-1])] == [PNG]
    for refused, wording in (
        ({"type": "input_image", "file_id": "file-1"}, "file_id"),
        ({"type": "input_image", "image_url": "data:image/png;base64,bm90IGFuIGltYWdl"}, "PNG"),
    ):
        with pytest.raises(openai.BadRequestError) as error:
            sdk.responses.create(model="m", input=[{"role": "user", "content": [refused]}])
        assert wording in str(error.value)
    with pytest.raises(openai.BadRequestError, match="only a user message"):
        sdk.responses.create(
            model="m",
            input=[
                {"role": "assistant", "content": [{"type": "input_image", "image_url": DATA_URL}]},
                {"role": "user", "content": "Hi"},
            ],
        )
