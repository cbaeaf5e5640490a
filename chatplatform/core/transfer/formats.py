"""The export formats the importer reads, by name (``chatgpt``, ``claude``): the one place
that maps a name to its reader; an unknown name is an error that lists the known ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chatplatform.core.transfer.chatgpt import read_chatgpt
from chatplatform.core.transfer.claude import read_claude
from chatplatform.core.transfer.records import (
    TransferConversation,
    TransferFormatError,
    export_json,
)

READERS: dict[str, Callable[[Any], list[TransferConversation]]] = {
    "chatgpt": read_chatgpt,
    "claude": read_claude,
}
#: Choices for forms and the command: name -> label.
FORMAT_LABELS = {"chatgpt": "ChatGPT (conversations.json)", "claude": "Claude (conversations.json)"}


def read_export(name: str, raw: bytes, *, max_bytes: int) -> list[TransferConversation]:
    """Every conversation of the export ``raw`` (a ``conversations.json`` or the service's zip)
    in the format ``name``; raises TransferFormatError saying what is wrong."""
    reader = READERS.get(name)
    if reader is None:
        known = ", ".join(sorted(READERS))
        raise TransferFormatError(f"Unknown format {name[:40]!r}: the formats are {known}.")
    if len(raw) > max_bytes:
        raise TransferFormatError(f"The file is larger than {max_bytes:,} bytes.")
    if not raw.strip():
        raise TransferFormatError("The file is empty.")
    return reader(export_json(raw, max_bytes=max_bytes))
