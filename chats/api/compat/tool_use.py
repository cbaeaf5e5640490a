"""The tools an SDK client defines and runs itself, as the SDK-compatible API reads them.

A client offers its tools with a request; the platform passes them to the model beside its
own memory tools. When the model calls one, the reply ends there with the calls (stored with
it), the client runs them and sends their results as its next message, which the reply after
it answers: the round is stored like any other turn, and the prompt keeps a call and its
results together whatever it trims (:mod:`chatplatform.core.llm.tool_rounds`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from chatplatform.core.llm.tools import FACT_TOOLS
from chats.api.compat.threads import invalid

#: The names a provider accepts for a tool.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: At most this many tools per request (the providers' own limit is in the hundreds).
MAX_TOOLS = 128
#: The platform's own tools: a client's tool may not take their names.
PLATFORM_TOOLS = frozenset(tool.name for tool in FACT_TOOLS)
#: A call's id as the platform stores it (the providers' ids fit).
MAX_CALL_ID = 64


def tool_spec(name: Any, description: Any, schema: Any, where: str) -> dict[str, Any]:
    """One offered tool, checked (400 naming ``where`` otherwise)."""
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise invalid(f"{where}: a tool's name is 1 to 64 letters, digits, _ or -.", "tools")
    if name in PLATFORM_TOOLS:
        raise invalid(f"{where}: {name} is the name of one of the platform's tools.", "tools")
    if description is not None and not isinstance(description, str):
        raise invalid(f"{where}: a tool's description must be a string.", "tools")
    schema = {"type": "object", "properties": {}} if schema is None else schema
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise invalid(f"{where}: a tool's parameters must be a JSON Schema object.", "tools")
    return {"name": name, "description": description or "", "input_schema": schema}


def tool_specs(data: dict[str, Any], spec_of: Callable[[Any, str], dict[str, Any]]) -> list[Any]:
    """The request's ``tools``, each read by the protocol's ``spec_of(tool, where)``."""
    tools = data.get("tools") or []
    if not isinstance(tools, list):
        raise invalid("tools must be a list.", "tools")
    return [spec_of(tool, f"tools[{index}]") for index, tool in enumerate(tools)]


#: OpenAI's ``tool_choice`` strings, as the platform names the choices.
OPENAI_CHOICES = {"auto": "auto", "none": "none", "required": "any"}


def openai_offer(
    specs: list[dict[str, Any]], choice: Any, forced: Callable[[dict[str, Any]], Any]
) -> dict[str, Any] | None:
    """:func:`offer` for OpenAI's ``tool_choice``: one of :data:`OPENAI_CHOICES`, or an
    object naming the function to call (``forced`` reads its name from it)."""
    if isinstance(choice, dict):
        name = forced(choice)
        if not isinstance(name, str):
            raise invalid("tool_choice must name a function.", "tool_choice")
        return offer(specs, "tool", name)
    choice = choice or "auto"
    if choice not in OPENAI_CHOICES:
        raise invalid("tool_choice must be none, auto, required or a function.", "tool_choice")
    return offer(specs, OPENAI_CHOICES[choice])


def offer(specs: list[dict[str, Any]], choice: str, name: str = "") -> dict[str, Any] | None:
    """What the new message stores of the tools offered (``Message.offered_tools``):
    ``choice`` is ``auto``, ``none``, ``any`` or ``tool`` (then ``name``, one of them)."""
    if not specs:
        if choice in ("any", "tool"):
            raise invalid("tool_choice asks for a tool call but no tools are given.", "tool_choice")
        return None
    if len(specs) > MAX_TOOLS:
        raise invalid(f"At most {MAX_TOOLS} tools per request.", "tools")
    names = [spec["name"] for spec in specs]
    if len(set(names)) != len(names):
        raise invalid("Each tool needs a name of its own.", "tools")
    if choice == "tool" and name not in names:
        raise invalid(f"tool_choice names {name!r}, which is not among the tools.", "tool_choice")
    return {"tools": specs, "choice": choice, "name": name if choice == "tool" else ""}


def call_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_CALL_ID:
        raise invalid(f"{where}: a tool call's id is a string of 1 to {MAX_CALL_ID} characters.")
    return value


def result_text(content: Any, where: str) -> str:
    """A tool result's content as text: a string, or text parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise invalid(f"{where}: a tool result's content must be text.")
            if not isinstance(part.get("text"), str):
                raise invalid(f"{where}: a text part needs its text.")
            texts.append(part["text"])
        return "\n".join(texts)
    raise invalid(f"{where}: a tool result's content must be a string or text parts.")


def stored_calls(outcome_reply: Any) -> list[dict[str, Any]]:
    """The calls a final reply ended with (none for a reply in text)."""
    return list(getattr(outcome_reply, "tool_calls", None) or [])
