"""Images attached to messages (visual context): type and size checks from the
file's own header. What an image costs in tokens is its provider's formula
(``ProviderKind.image_tokens``). Pure: no Django."""

from __future__ import annotations

import base64
import binascii
import math
import struct
from dataclasses import dataclass

ALLOWED_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
MAX_IMAGE_BYTES = 5 * 1024 * 1024
#: The longest base64 text of an image of at most MAX_IMAGE_BYTES (4 characters per 3 bytes):
#: what a message frame or an API body must have room for beside the text.
MAX_IMAGE_BASE64_CHARS = 4 * -(-MAX_IMAGE_BYTES // 3)
MAX_PIXELS_PER_SIDE = 8000


class ImageRejected(ValueError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class ImageInfo:
    media_type: str
    width: int
    height: int
    size: int


def _sniff(data: bytes) -> tuple[str, int, int]:
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return "image/png", width, height
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return "image/gif", width, height
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8X":
            width = 1 + int.from_bytes(data[24:27], "little")
            height = 1 + int.from_bytes(data[27:30], "little")
            return "image/webp", width, height
        if chunk == b"VP8 ":
            width, height = struct.unpack("<HH", data[26:30])
            return "image/webp", width & 0x3FFF, height & 0x3FFF
        if chunk == b"VP8L":
            bits = int.from_bytes(data[21:25], "little")
            return "image/webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if data[:2] == b"\xff\xd8":
        index = 2
        while index + 9 < len(data):
            if data[index] != 0xFF:
                index += 1
                continue
            marker = data[index + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                index += 2
                continue
            length = struct.unpack(">H", data[index + 2 : index + 4])[0]
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                height, width = struct.unpack(">HH", data[index + 5 : index + 9])
                return "image/jpeg", width, height
            index += 2 + length
    raise ImageRejected("The file is not a PNG, JPEG, GIF or WebP image.")


def inspect_image(data: bytes, declared_type: str | None = None) -> ImageInfo:
    """Check an image by its bytes; raise ImageRejected saying what is wrong."""
    if not data:
        raise ImageRejected("The image is empty.")
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageRejected(f"The image has {len(data):,} bytes; the limit is {MAX_IMAGE_BYTES:,}.")
    media_type, width, height = _sniff(data)
    if declared_type and declared_type != media_type:
        raise ImageRejected(f"The image says it is {declared_type} but it is {media_type}.")
    if not (0 < width <= MAX_PIXELS_PER_SIDE and 0 < height <= MAX_PIXELS_PER_SIDE):
        raise ImageRejected(f"Image dimensions {width}x{height} are out of range.")
    return ImageInfo(media_type, width, height, len(data))


def decode_base64_image(encoded: str, declared_type: str | None = None) -> tuple[bytes, ImageInfo]:
    if not isinstance(encoded, str) or len(encoded) > MAX_IMAGE_BASE64_CHARS:
        raise ImageRejected("The image must be base64 text of at most 5 MB.")
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ImageRejected("The image is not valid base64.") from None
    return data, inspect_image(data, declared_type)


def size_label(size: int) -> str:
    """A byte count as people read it: "68 bytes", "12 KB", "2.4 MB"."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{math.ceil(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def describe_image(info: ImageInfo) -> str:
    """What a model that cannot see images is told of one: that it is there, its type and size
    (so it can say it cannot see it instead of pretending to)."""
    return (
        f"[The user attached an image ({info.media_type}, {info.width}x{info.height} px, "
        f"{size_label(info.size)}); this model cannot see images, so only its type and size "
        "are known.]"
    )
