"""The image of a new message as the provider request gets it: a vision model gets the image
with its tokens counted by the provider's own formula; any other model a description saying
an image was attached, its type and size."""

from __future__ import annotations

import base64
import struct
from types import SimpleNamespace

import pytest

from chatplatform.core.llm.providers import provider_kind
from chats.assembly.request import attached_image
from chats.images import inspect_image
from tests.factories import make_message

pytestmark = pytest.mark.django_db

#: The header of a 1600x1200 PNG: enough for the checks, which read only the header.
PHOTO = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + struct.pack(">II", 1600, 1200) + b"\x08\x02\0\0\0"


def policy(provider: str, *, vision: bool) -> SimpleNamespace:
    profile = SimpleNamespace(
        provider=provider,
        provider_kind=provider_kind(provider),
        supports_vision=vision,
        context_window=200_000,
    )
    return SimpleNamespace(
        model_profile=profile, max_context_tokens=20_000, reserved_response_tokens=1_000
    )


@pytest.fixture
def photo_message(conversation_a, member_a):
    return make_message(
        conversation_a, "Look", author=member_a, image=(PHOTO, inspect_image(PHOTO))
    )


@pytest.mark.parametrize(("provider", "tokens"), [("anthropic", 1534), ("openai", 765)])
def test_a_vision_model_gets_the_image_counted_by_its_providers_formula(
    photo_message, provider, tokens
):
    image = attached_image(photo_message, policy(provider, vision=True))
    assert image is not None
    assert image.tokens == tokens == provider_kind(provider).image_tokens(1600, 1200)
    assert image.media_type == "image/png" and base64.b64decode(image.data_base64) == PHOTO
    assert image.note == ""
    assert image.prompt_budget == 19_000


def test_another_model_is_told_the_images_type_and_size(photo_message):
    image = attached_image(photo_message, policy("anthropic", vision=False))
    assert image is not None and image.tokens == 0 and image.data_base64 == ""
    assert "attached an image" in image.note
    assert "image/png" in image.note and "1600x1200 px" in image.note
    assert f"{len(PHOTO)} bytes" in image.note and "cannot see images" in image.note


def test_a_message_without_an_image_has_none(conversation_a, member_a):
    plain = make_message(conversation_a, "Just text", author=member_a)
    assert attached_image(plain, policy("anthropic", vision=True)) is None
