"""What an export holds, whatever service wrote it: conversations of user and assistant
messages (and the platform's tool rounds: a reply's calls of an application's tools, the
message of their results), each with the id the export gave it (what makes a second import of
the same file add nothing) and its original time; and the error a file that cannot be read
raises."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

#: The roles an imported message has (the platform's own role names).
USER, ASSISTANT, TOOL = "user", "assistant", "tool"
#: The longest id of a tool call the platform stores (``Message.tool_group`` holds one).
MAX_CALL_ID = 64
#: The text of a tool message whose results hold none.
NO_OUTPUT = "(no output)"

#: The file inside an export's zip archive that holds the conversations.
CONVERSATIONS_FILE = "conversations.json"


class TransferFormatError(ValueError):
    """The file cannot be read as the export it claims to be; the message says what is wrong
    and where (which conversation, which field)."""


@dataclass(frozen=True)
class TransferMessage:
    source_id: str
    role: str  # USER, ASSISTANT or TOOL
    text: str
    created_at: datetime | None
    #: A reply's calls of the application's tools, as ``Message.tool_calls`` holds them
    #: (``{"id", "name", "input"}``); its text may be empty.
    tool_calls: tuple[dict[str, Any], ...] = ()
    #: A tool message's results of those calls, as ``Message.tool_results`` holds them
    #: (``{"tool_use_id", "content", "is_error"}``); its text is theirs
    #: (:func:`tool_results_text`).
    tool_results: tuple[dict[str, Any], ...] = ()
    #: The round a reply's calls and the message of their results share: the first call's id.
    tool_group: str | None = None


def tool_results_text(results: Iterable[dict[str, Any]]) -> str:
    """A tool message's text as the platform stores it: its results' texts, or
    :data:`NO_OUTPUT` when they hold none."""
    return "\n\n".join(str(r["content"]) for r in results if r["content"]) or NO_OUTPUT


@dataclass(frozen=True)
class TransferConversation:
    source_id: str
    title: str
    created_at: datetime | None
    updated_at: datetime | None
    messages: tuple[TransferMessage, ...]


def export_json(raw: bytes, *, max_bytes: int) -> Any:
    """The JSON document of an export: ``raw`` is the ``conversations.json`` file itself or
    the zip archive the service sent (its ``conversations.json`` is read, at most
    ``max_bytes`` of it uncompressed)."""
    if raw[:4] == b"PK\x03\x04":
        raw = _from_zip(raw, max_bytes)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TransferFormatError(f"The file is not UTF-8 text (byte {exc.start}).") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TransferFormatError(
            f"The file is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}."
        ) from None
    except RecursionError:
        raise TransferFormatError("The file is not valid JSON: it is nested too deeply.") from None


def _from_zip(raw: bytes, max_bytes: int) -> bytes:
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
    except zipfile.BadZipFile:
        raise TransferFormatError("The zip archive cannot be opened.") from None
    with archive:
        names = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == CONVERSATIONS_FILE]
        if not names:
            raise TransferFormatError(f"The zip archive has no {CONVERSATIONS_FILE}.")
        name = min(names, key=len)
        if archive.getinfo(name).file_size > max_bytes:
            raise TransferFormatError(
                f"{CONVERSATIONS_FILE} in the archive is larger than {max_bytes:,} bytes."
            )
        with archive.open(name) as member:
            data = member.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise TransferFormatError(
                f"{CONVERSATIONS_FILE} in the archive is larger than {max_bytes:,} bytes."
            )
        return data


def conversations_read(
    document: Any, service: str, read: Callable[[Any, Where], TransferConversation]
) -> list[TransferConversation]:
    """Each conversation of an export's parsed JSON read by ``read``; raises
    TransferFormatError naming what is wrong (nothing is read from a file that has an error
    anywhere)."""
    return [
        read(item, Where(n, item)) for n, item in enumerate(conversation_list(document, service))
    ]


def conversation_list(document: Any, service: str) -> list[Any]:
    """The export's list of conversations, or the error saying the document is not one."""
    if isinstance(document, dict) and isinstance(document.get("conversations"), list):
        document = document["conversations"]
    if not isinstance(document, list):
        raise TransferFormatError(
            f"A {service} export is a list of conversations; this file holds {_kind(document)}."
        )
    return document


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "a number" if isinstance(value, (int, float)) else type(value).__name__


class Where:
    """Names the place in the file an error is about: ``conversation 3 ("Title")``."""

    def __init__(self, index: int, item: Any) -> None:
        self.label = f"conversation {index + 1}"
        if isinstance(item, dict):
            title = item.get("title") or item.get("name")
            if isinstance(title, str) and title.strip():
                self.label += f' ("{title.strip()[:60]}")'

    def error(self, what: str) -> TransferFormatError:
        return TransferFormatError(f"{self.label}: {what}.")

    def field(self, item: Any, name: str, kinds: tuple[type, ...], *, context: str = "") -> Any:
        """``item[name]``, which must be there with one of ``kinds`` (the error names both)."""
        prefix = f"{context} " if context else ""
        if not isinstance(item, dict):
            raise self.error(f"{prefix}is {_kind(item)}, not an object")
        if name not in item:
            raise self.error(f"{prefix}has no field {name!r}")
        value = item[name]
        if not isinstance(value, kinds) or isinstance(value, bool):
            raise self.error(f"{prefix}field {name!r} is {_kind(value)}")
        return value


def text_id(value: Any, where: Where, what: str) -> str:
    """An export's id (a string, or a number written as one), at most 200 characters."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise where.error(f"{what} is {_kind(value)}, not an id")
    text = str(value).strip()
    if not text or len(text) > 200:
        raise where.error(f"{what} is not a usable id (empty or longer than 200 characters)")
    return text


def epoch_time(value: Any, where: Where, what: str) -> datetime | None:
    """A time given as seconds since 1970 (ChatGPT's), or None when there is none."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise where.error(f"{what} is {_kind(value)}, not a time in seconds")
    try:
        return datetime.fromtimestamp(float(value), tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise where.error(f"{what} ({value}) is not a possible time") from None


def iso_time(value: Any, where: Where, what: str) -> datetime | None:
    """A time given as ISO 8601 text (Claude's), or None when there is none."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise where.error(f"{what} is {_kind(value)}, not an ISO 8601 time")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise where.error(f"{what} ({value[:40]!r}) is not an ISO 8601 time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
