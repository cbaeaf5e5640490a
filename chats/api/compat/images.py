"""Images in SDK requests: read from each protocol's content parts, then made the new
message's image (inline images decoded and checked, images named by URL fetched under the
operator's rules, :mod:`chats.image_urls`).

A stored message holds one image, and the model is shown the image of the message it answers
(as with the web UI and the REST API): so the client's new message may carry one image; the
images of earlier turns are history the client already had answered, and are not fetched."""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chats.api.compat.threads import invalid
from chats.api.errors import ApiError
from chats.image_urls import fetch_image
from chats.images import ImageRejected, decode_base64_image

DATA_URL = re.compile(r"data:(?P<type>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)", re.DOTALL)


@dataclass(frozen=True)
class ImageRef:
    """An image a client sent: inline (``data``, base64, with its ``media_type``) or by
    ``url``."""

    media_type: str | None = None
    data: str | None = None
    url: str | None = None


def _url_image(url: Any, where: str) -> ImageRef:
    if not isinstance(url, str) or not url:
        raise invalid(f"{where}: an image needs its URL.")
    if url.startswith("data:"):
        match = DATA_URL.fullmatch(url)
        if match is None:
            raise invalid(f"{where}: a data URL must be data:<media type>;base64,<data>.")
        return ImageRef(media_type=match["type"], data=match["data"])
    return ImageRef(url=url)


def openai_image(part: dict[str, Any], where: str) -> ImageRef:
    """An ``image_url`` content part (``{"url": ...}``, a data URL or an http(s) URL)."""
    image_url = part.get("image_url")
    url = image_url.get("url") if isinstance(image_url, dict) else image_url
    return _url_image(url, where)


def anthropic_image(block: dict[str, Any], where: str) -> ImageRef:
    """An ``image`` content block (source ``base64`` or ``url``)."""
    source = block.get("source")
    if not isinstance(source, dict):
        raise invalid(f"{where}: an image block needs its source.")
    if source.get("type") == "base64":
        if not isinstance(source.get("data"), str) or not isinstance(source.get("media_type"), str):
            raise invalid(f"{where}: a base64 image needs its media_type and data.")
        return ImageRef(media_type=source["media_type"], data=source["data"])
    if source.get("type") == "url":
        return _url_image(source.get("url"), where)
    raise invalid(f"{where}: an image source must be base64 or url.")


def new_message_image(images: Sequence[ImageRef]) -> ImageRef | None:
    """The image of the client's new message (400 for more than one)."""
    if len(images) > 1:
        raise invalid(
            f"The new message carries {len(images)} images; a message holds one. Send them "
            "one per message."
        )
    return images[0] if images else None


def image_payload(image: ImageRef | None) -> dict[str, str] | None:
    """The image as the send service takes it (``{"media_type", "data"}``, base64), checked
    or fetched now, before anything is stored; 400 saying what is wrong otherwise."""
    if image is None:
        return None
    try:
        if image.url is not None:
            data, info = fetch_image(image.url)
            return {"media_type": info.media_type, "data": base64.b64encode(data).decode()}
        decode_base64_image(image.data or "", image.media_type)
    except ImageRejected as exc:
        raise ApiError(400, "invalid_image", exc.message, {"image": [exc.message]}) from None
    return {"media_type": image.media_type or "", "data": image.data or ""}
