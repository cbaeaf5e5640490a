"""Chat commands answered without the model (``/memories``: the user's standing instructions
and preferences, then their saved facts; ``/help``:
the commands themselves).

:data:`COMMANDS` is the one list of commands: what answers each, and the usage and description
people read. The chat page offers the commands as the user types from :func:`command_catalog`
(given to the page by the server), and ``/help`` answers from the same list.

A message whose first word names a command is answered here and stored nowhere: the sender
gets the answer as a ``command`` event (:func:`command_event`) that names the message's
``client_id``, which is how the page knows its bubble was received (a command has no stored
message to acknowledge). The WebSocket, the REST API and its server-sent events all answer
with :func:`command_name`, :func:`command_answer` and that event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chatplatform.core.memory.kinds import STANDING_KINDS, memory_kind_for
from memory.selectors import current_facts, facts_page, kinds_sent_in

PAGE_SIZE = 10
#: Most standing instructions and preferences listed (above the first page of facts); the
#: policy keeps at most 100 of them per user.
MAX_STANDING_LISTED = 100
#: Page numbers are read only up to this many digits: more cannot name a page of anyone's
#: facts, and would overflow the query's offset.
MAX_PAGE_DIGITS = 6


class CommandError(Exception):
    """A command the platform cannot answer as asked: ``code`` and a message for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _page_number(argument: str) -> int | None:
    """The page a ``/memories`` argument names, or None when it names none (not a whole
    number of at most :data:`MAX_PAGE_DIGITS` ASCII digits, or below 1)."""
    if not (argument.isascii() and argument.isdigit()) or len(argument) > MAX_PAGE_DIGITS:
        return None
    page = int(argument)
    return page if page >= 1 else None


def memories_command(tenant_id: int, user: Any, text: str) -> str:
    """``/memories [page]``: the user's standing instructions and preferences (on the first
    page, under their own heading, each with its kind), then their facts, paginated. Raises
    CommandError (``invalid_page``, saying how many pages there are) for anything but an
    existing page."""
    parts = text.strip().split()
    page: int | None = 1
    if len(parts) == 2:
        page = _page_number(parts[1])
    elif len(parts) > 2:
        page = None
    facts, total = facts_page(
        tenant_id=tenant_id,
        user_id=user.pk,
        page=page or 1,
        page_size=PAGE_SIZE,
        kinds=kinds_sent_in("facts"),
    )
    pages = max(1, (total + PAGE_SIZE - 1) // PAGE_SIZE)
    if page is None or page > pages:
        raise CommandError(
            "invalid_page",
            f"No such page: your memories fill {pages} page{'s' if pages > 1 else ''}; "
            f"send /memories or /memories followed by a page number from 1 to {pages}.",
        )
    lines: list[str] = []
    if page == 1:
        standing = current_facts(
            tenant_id, user.pk, limit=MAX_STANDING_LISTED, kinds=list(STANDING_KINDS)
        )
        if standing:
            lines.append(f"How you want to be answered ({len(standing)}):")
            lines += [f"- {memory_kind_for(m.kind).label}: {m.text}" for m in standing]
    if total == 0:
        if not lines:
            return "No memories saved yet."
        return "\n".join([*lines, "", "No facts saved yet."])
    if lines:
        lines.append("")
    lines.append(f"Your facts (page {page} of {pages}, {total} in all):")
    first = (page - 1) * PAGE_SIZE
    for number, fact in enumerate(facts, start=first + 1):
        key = f"[{fact.key}] " if fact.key else ""
        lines.append(f"{number}. {key}{fact.text}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Command:
    """A chat command: its ``name`` (the message's first word, without the slash), how it is
    written (``usage``), what it does (``description``) and what answers it."""

    name: str
    usage: str
    description: str
    answer: Callable[[int, Any, str], str]


def help_command(tenant_id: int, user: Any, text: str) -> str:
    """``/help``: every command, with its usage and what it does (the model is not asked)."""
    lines = ["Commands (answered here, without the model, and not stored):"]
    lines += [f"{command.usage}: {command.description}" for command in COMMANDS.values()]
    return "\n".join(lines)


#: Command name -> the command, in the order people are shown them.
COMMANDS: dict[str, Command] = {
    command.name: command
    for command in (
        Command(
            "memories",
            "/memories [page]",
            "list how you asked to be answered and what the assistant remembers about you, "
            f"{PAGE_SIZE} facts a page",
            memories_command,
        ),
        Command("help", "/help", "list these commands", help_command),
    )
}


def command_catalog() -> list[dict[str, str]]:
    """The commands as the chat page offers them while the user types: name, usage and
    description of each, in :data:`COMMANDS`' order."""
    return [
        {"name": c.name, "usage": c.usage, "description": c.description} for c in COMMANDS.values()
    ]


def command_name(content: str) -> str | None:
    """The command ``content`` asks for (``"/memories 2"`` -> ``"memories"``), or None for
    an ordinary message (``/memoriesx`` included: a command is a whole word)."""
    words = content.split(maxsplit=1)
    if not words or not words[0].startswith("/"):
        return None
    name = words[0][1:]
    return name if name in COMMANDS else None


def command_answer(name: str, tenant_id: int, user: Any, content: str) -> str:
    """The answer of command ``name`` (see :func:`command_name`) to ``user``'s ``content``;
    raises :class:`CommandError` when it cannot be answered as asked."""
    return COMMANDS[name].answer(tenant_id, user, content)


def command_event(name: str, text: str, client_id: str | None) -> dict[str, Any]:
    """The answer as the sender gets it: the WebSocket frame, the REST API's body and the
    server-sent event's data."""
    return {"type": "command", "command": name, "text": text, "client_id": client_id}
