"""An OpenAI Responses API request as the platform reads it: the body's fields checked (a 400
naming the parameter otherwise), the input items read into turns and system text.

Input items are read by kind, one reader per item ``type`` (:data:`ITEM_READERS`) and one per
content part ``type`` (:data:`PART_READERS`: text, and images by URL or inline); a kind without
a reader (files, references to stored items, the provider's own tools' calls) is refused
naming it, never dropped. The client's function calls and their outputs are a tool round
(:mod:`chats.api.compat.tool_use`).

Fields are an allow-list: anything else the body sets (hosted tools, ``background``,
``conversation`` objects, reasoning options, prompt templates...) is refused naming it."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from chats.api.compat.images import ImageRef, new_message_image, openai_image
from chats.api.compat.openai_chat import SYSTEM_ROLES
from chats.api.compat.threads import invalid
from chats.api.compat.tool_use import call_id, openai_offer, result_text, tool_spec, tool_specs
from chats.api.compat.transcript import ASSISTANT, TOOL, USER, Turn, tool_parts, tool_turn

#: OpenAI's limits on ``metadata``: pairs, key and value lengths.
METADATA_PAIRS, METADATA_KEY_CHARS, METADATA_VALUE_CHARS = 16, 64, 512
#: Where ``metadata`` may name the conversation (as for Chat Completions).
CONVERSATION_KEY = "conversation_id"


@dataclass(frozen=True)
class ResponsesCall:
    """A Responses request: the client's turns and system text, what names the conversation,
    what the response object echoes."""

    turns: list[Turn]
    #: The client's system prompt: ``instructions``, then the input's system/developer items.
    system: str
    instructions: str | None
    stream: bool
    store: bool
    previous_response_id: str | None
    metadata: dict[str, str] = field(default_factory=dict)
    #: The ``X-Conversation-Id`` header's value, else ``metadata.conversation_id``.
    conversation_id: Any = None
    #: The image of the client's new message, if it carries one.
    image: ImageRef | None = None
    #: The tools the client offers the reply (:func:`chats.api.compat.tool_use.offer`).
    offered: dict[str, Any] | None = None


@dataclass
class _Read:
    """The input read so far."""

    turns: list[Turn] = field(default_factory=list)
    system: list[str] = field(default_factory=list)
    #: The images of the user turn the input ends with.
    trailing: list[ImageRef] = field(default_factory=list)


def _text_part(part: dict[str, Any], where: str) -> str:
    text = part.get("text")
    if not isinstance(text, str):
        raise invalid(f"{where}: a text part needs its text.", "input")
    return text


def _image_part(part: dict[str, Any], where: str) -> ImageRef:
    """``input_image``: ``image_url`` a data URL or an http(s) URL (a stored file's
    ``file_id`` is not read: this platform keeps no files of OpenAI's)."""
    if part.get("file_id") and not part.get("image_url"):
        raise invalid(f"{where}: images by file_id are not supported; send image_url.", "input")
    return openai_image(part, where)


#: Content part ``type`` -> its text, or the image it carries. Files are not read here.
PART_READERS: Mapping[str, Callable[[dict[str, Any], str], str | ImageRef]] = {
    "input_text": _text_part,
    "output_text": _text_part,
    "input_image": _image_part,
}


def _content(content: Any, where: str) -> tuple[str, list[ImageRef]]:
    """A message's text (its text parts joined) and its images."""
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise invalid(f"{where}.content must be a string or a list of content parts.", "input")
    parts: list[str] = []
    images: list[ImageRef] = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        reader = PART_READERS.get(kind) if isinstance(kind, str) else None
        if reader is None:
            raise invalid(
                f"{where}.content[{index}]: content parts of type {kind!r} are not supported "
                "by this endpoint (text and images only).",
                "input",
            )
        found = reader(part, f"{where}.content[{index}]")
        if isinstance(found, ImageRef):
            images.append(found)
        else:
            parts.append(found)
    return "\n".join(parts), images


def _message_item(item: dict[str, Any], where: str, read: _Read) -> None:
    role = item.get("role")
    text, images = _content(item.get("content"), where)
    if images and role != USER:
        raise invalid(f"{where}: only a user message can carry images.", "input")
    if role in SYSTEM_ROLES:
        read.system.append(text)
    elif role in (USER, ASSISTANT):
        read.turns.append((str(role), text))
        read.trailing = read.trailing + images if role == USER else []
    else:
        raise invalid(f"{where}.role must be user, assistant, system or developer.", "input")


def _function_call(item: dict[str, Any], where: str, read: _Read) -> None:
    """A call the model made (the client's history): joins the assistant turn before it."""
    name, arguments = item.get("name"), item.get("arguments")
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        parsed = None
    if not isinstance(name, str) or not isinstance(parsed, dict):
        raise invalid(
            f"{where}: a function call needs its name and JSON object arguments.", "input"
        )
    call = {"id": call_id(item.get("call_id"), where), "name": name, "input": parsed}
    last = read.turns[-1] if read.turns else None
    if last is not None and last[0] == ASSISTANT:
        read.turns[-1] = tool_turn(ASSISTANT, last[1], [*tool_parts(last), call])
    else:
        read.turns.append(tool_turn(ASSISTANT, "", [call]))
    read.trailing = []


def _function_call_output(item: dict[str, Any], where: str, read: _Read) -> None:
    result = {
        "tool_use_id": call_id(item.get("call_id"), where),
        "content": result_text(_output_texts(item.get("output"), where), where),
        "is_error": False,
    }
    read.turns.append(tool_turn(TOOL, "", [result]))
    read.trailing = []


def _output_texts(output: Any, where: str) -> Any:
    """A function call's output: a string, or its ``input_text`` parts as text parts."""
    if not isinstance(output, list):
        return output
    return [
        {"type": "text", "text": p.get("text")}
        if isinstance(p, dict) and p.get("type") == "input_text"
        else p
        for p in output
    ]


#: Input item ``type`` -> its reader (an item without a type is a message, as OpenAI reads it).
ITEM_READERS: Mapping[str, Callable[[dict[str, Any], str, _Read], None]] = {
    "message": _message_item,
    "function_call": _function_call,
    "function_call_output": _function_call_output,
}


def _function(tool: Any, where: str) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        raise invalid(
            f"{where}: only function tools are taken (hosted tools run at OpenAI).", "tools"
        )
    return tool_spec(tool.get("name"), tool.get("description"), tool.get("parameters"), where)


def _forced(choice: dict[str, Any]) -> Any:
    return choice.get("name") if choice.get("type") == "function" else None


def _tools(data: dict[str, Any]) -> dict[str, Any] | None:
    """The request's function ``tools`` and ``tool_choice``."""
    return openai_offer(tool_specs(data, _function), data.get("tool_choice"), _forced)


def input_read(value: Any) -> _Read:
    """The turns, system texts and the new message's images of ``input`` (a string: one
    user turn)."""
    if isinstance(value, str):
        return _Read(turns=[(USER, value)])
    if not isinstance(value, list) or not value:
        raise invalid("input must be a string or a non-empty list of input items.", "input")
    read = _Read()
    for index, item in enumerate(value):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise invalid(f"{where} must be an object.", "input")
        kind = item.get("type", "message")
        reader = ITEM_READERS.get(kind) if isinstance(kind, str) else None
        if reader is None:
            raise invalid(
                f"{where}: input items of type {kind!r} are not supported by this endpoint.",
                "input",
            )
        reader(item, where, read)
    return read


def _none_listed(value: Any) -> bool:
    return value in (None, [])


def _plain_text(value: Any) -> bool:
    if value is None:
        return True
    if not isinstance(value, dict) or set(value) - {"format", "verbosity"}:
        return False
    text_format = value.get("format")
    return value.get("verbosity") is None and (
        text_format is None or text_format == {"type": "text"}
    )


def _flag(value: Any) -> bool:
    return value is None or isinstance(value, bool)


def _identifier(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _stream_options(value: Any) -> bool:
    # ``include_obfuscation`` pads deltas against length side channels; there is none to pad.
    return value is None or (isinstance(value, dict) and set(value) <= {"include_obfuscation"})


def _truncation(value: Any) -> bool:
    # The platform fits every prompt to the policy's budget: neither value can overflow.
    return value in (None, "auto", "disabled")


def _positive_int(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0)


def _number_up_to(top: float) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if value is None:
            return True
        return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= top

    return check


#: Fields accepted without changing the answer, with what they may hold: the ones that say
#: "no tools" or "plain text", identifiers of the end user, and the sampling knobs (the tenant
#: policy sets the model, its reply length and its sampling, as for Chat Completions).
ACCEPTED: Mapping[str, Callable[[Any], bool]] = {
    "parallel_tool_calls": _flag,
    "include": _none_listed,
    "text": _plain_text,
    "truncation": _truncation,
    "stream_options": _stream_options,
    "user": _identifier,
    "safety_identifier": _identifier,
    "max_output_tokens": _positive_int,
    "temperature": _number_up_to(2),
    "top_p": _number_up_to(1),
}
#: Fields read into the call.
READ = frozenset(
    {
        "model",
        "input",
        "instructions",
        "previous_response_id",
        "store",
        "stream",
        "metadata",
        "tools",
        "tool_choice",
    }
)


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if (
        not isinstance(value, dict)
        or len(value) > METADATA_PAIRS
        or not all(
            isinstance(k, str)
            and isinstance(v, str)
            and len(k) <= METADATA_KEY_CHARS
            and len(v) <= METADATA_VALUE_CHARS
            for k, v in value.items()
        )
    ):
        raise invalid(
            f"metadata must be an object of at most {METADATA_PAIRS} string values "
            f"(keys up to {METADATA_KEY_CHARS} characters, values up to "
            f"{METADATA_VALUE_CHARS}).",
            "metadata",
        )
    return dict(value)


def _optional(data: dict[str, Any], name: str, kind: type, default: Any) -> Any:
    value = data.get(name)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise invalid(f"{name} must be a {kind.__name__}.", name)
    return value


def responses_call(data: Any, named: str | None) -> ResponsesCall:
    """The request body read (400 naming the parameter otherwise); ``named``: the
    conversation header's value."""
    if not isinstance(data, dict):
        raise invalid("The body must be a JSON object.", "body")
    if not isinstance(data.get("model"), str) or not data["model"]:
        raise invalid("model is required (any of GET /models; the policy's is used).", "model")
    for name, value in data.items():
        if name in READ:
            continue
        check = ACCEPTED.get(name)
        if check is None and value in (None, False, "", [], {}):
            continue
        if check is None:
            raise invalid(f"{name} is not supported by this endpoint.", name)
        if not check(value):
            raise invalid(f"{name}: this value is not supported by this endpoint.", name)
    if "input" not in data:
        raise invalid("input is required.", "input")
    read = input_read(data["input"])
    turns, system = read.turns, read.system
    if not turns or turns[-1][0] not in (USER, TOOL):
        raise invalid(
            "The last input item must be the user's message (or function call outputs).", "input"
        )
    instructions = _optional(data, "instructions", str, None)
    metadata = _metadata(data.get("metadata"))
    previous = _optional(data, "previous_response_id", str, None)
    return ResponsesCall(
        turns=turns,
        system="\n\n".join(s for s in [instructions or "", *system] if s.strip()),
        instructions=instructions,
        stream=_optional(data, "stream", bool, False),
        store=_optional(data, "store", bool, True),
        previous_response_id=previous or None,
        metadata=metadata,
        conversation_id=named if named is not None else metadata.get(CONVERSATION_KEY),
        image=new_message_image(read.trailing),
        offered=_tools(data),
    )
