"""The BEAM conversation format, read into the evaluation's samples. Pure: nothing here
imports Django.

A BEAM conversation is one user working with an assistant for weeks: a list of batches (each
read as a session; a longer conversation may group them in parts, read in order), each of
turns, each a list of messages ``{role, id, content[, time_anchor]}``; ``id`` numbers the
messages from 0. A user message's ``time_anchor`` (``"March-15-2024"``), or its batch's, dates
the session; a batch without one follows the previous one. The roles are kept: the
assistant's messages are the platform's own replies. Copies of the dataset that store
``chat`` or ``probing_questions`` as text are read the same.

Questions are the ``probing_questions`` of ten abilities. A question's evidence is the
messages its references name: ``source_chat_ids`` (a list of ids, or a mapping whose values
are lists) and ``conversation_references`` entries ``"chat_id: N"``; a question with none is
not scored. For instruction and preference following the evidence is where the user stated
the instruction or preference: it counts as present in the prompt as that message or as the
sentence the question quotes (``instruction_being_tested``, ``preference_being_tested``), in
the user's own words either way. A knowledge update also names the message with the newest
value (``updated_info``): ``latest_evidence_percent`` counts the questions whose newest value is
in the prompt, what a memory that prefers the latest statement must keep when room is short.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from .locomo import Question, Sample, Session, Turn

#: The abilities, in BEAM's order; the first seven are the ones a memory must serve, whose
#: mean is reported as ``core_percent``.
ABILITIES = (
    "information_extraction",
    "instruction_following",
    "preference_following",
    "knowledge_update",
    "contradiction_resolution",
    "temporal_reasoning",
    "multi_session_reasoning",
    "event_ordering",
    "summarization",
    "abstention",
)
CORE_ABILITIES = ABILITIES[:7]
USER = "user"
ASSISTANT = "assistant"
#: The quoted instruction or preference a question tests, by ability.
_QUOTED = {
    "instruction_following": "instruction_being_tested",
    "preference_following": "preference_being_tested",
}
#: The key of ``source_chat_ids`` naming the messages that state a changed value's newest form.
UPDATED = "updated_info"
_CHAT_ID = re.compile(r"chat_id\s*:\s*(\d+)", re.IGNORECASE)
_ANCHOR = re.compile(r"([A-Za-z]+)[-\s]+(\d{1,2})[-\s,]+(\d{4})")
_DAY_FIRST = re.compile(r"\b(\d{1,2})[-\s]+([A-Za-z]{3,})[-\s,]+(\d{4})")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
#: A batch without a date follows the previous one by this much.
NEXT_BATCH = timedelta(hours=1)
FIRST_DATE = datetime(2024, 1, 1, 9, 0)


def is_beam(data: Any) -> bool:
    """Whether loaded JSON is in the BEAM format (conversations with ``chat`` batches and
    ``probing_questions``) rather than LoCoMo's."""
    first = data[0] if isinstance(data, list) and data else data
    return isinstance(first, Mapping) and "chat" in first and "probing_questions" in first


def parse_anchor(value: str) -> datetime | None:
    """``"March-15-2024"`` (or ``"15 March 2024"``, ``"2024-03-15"``) →
    ``datetime(2024, 3, 15, 9, 0)``; ``None`` if unreadable."""
    iso = _ISO_DATE.search(value or "")
    if iso:
        try:
            return datetime(int(iso[1]), int(iso[2]), int(iso[3]), 9, 0)
        except ValueError:
            return None
    day_first = _DAY_FIRST.search(value or "")
    if day_first:
        day, month, year = day_first.groups()
        return _month_day_year(month, day, year)
    match = _ANCHOR.search(value or "")
    if not match:
        return None
    month, day, year = match.groups()
    return _month_day_year(month, day, year)


def _month_day_year(month: str, day: str, year: str) -> datetime | None:
    try:
        return datetime.strptime(f"{month[:3]} {day} {year}", "%b %d %Y").replace(hour=9)
    except ValueError:
        return None


def _messages(batch: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for turn in batch.get("turns") or []:
        if isinstance(turn, Mapping):
            out.append(turn)
        else:
            out.extend(m for m in turn if isinstance(m, Mapping))
    return out


def _session(number: int, batch: Mapping[str, Any], previous: datetime | None) -> Session:
    messages = _messages(batch)
    anchors = [batch.get("time_anchor")] + [m.get("time_anchor") for m in messages]
    dated = next((d for a in anchors if a and (d := parse_anchor(str(a)))), None)
    when = dated or (previous + NEXT_BATCH if previous else FIRST_DATE)
    if previous is not None and when <= previous:
        when = previous + NEXT_BATCH  # sessions stay in order
    turns = tuple(
        Turn(
            str(m.get("id", "")),
            ASSISTANT if m.get("role") == ASSISTANT else USER,
            str(m.get("content") or ""),
        )
        for m in messages
    )
    return Session(number, when, turns)


def evidence_ids(question: Mapping[str, Any]) -> list[str]:
    """The message ids a question's references name, deduplicated, in order."""
    ids: list[str] = []

    def add(values: Iterable[Any]) -> None:
        for value in values:
            if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
                key = str(int(value))
                if key not in ids:
                    ids.append(key)

    source = question.get("source_chat_ids")
    if isinstance(source, Mapping):
        for value in source.values():
            add(value if isinstance(value, list) else [value])
    elif isinstance(source, list):
        add(source)
    references = question.get("conversation_references") or []
    if isinstance(references, str):
        references = [references]
    for reference in references:
        add(_CHAT_ID.findall(str(reference)))
    return ids


def latest_ids(question: Mapping[str, Any]) -> tuple[str, ...]:
    """The ids of the messages stating a changed value's newest form: a knowledge update's
    ``source_chat_ids["updated_info"]`` (empty for other questions)."""
    source = question.get("source_chat_ids")
    if not isinstance(source, Mapping):
        return ()
    value = source.get(UPDATED)
    values = value if isinstance(value, list) else [value]
    return tuple(
        str(int(v))
        for v in values
        if isinstance(v, int) or (isinstance(v, str) and v.strip().isdigit())
    )


def batches(chat: Any) -> Iterator[Mapping[str, Any]]:
    """The batches of a conversation's ``chat`` in order: a batch is a mapping with
    ``turns``; a longer conversation may group its batches in parts (a list of lists of
    batches, or a mapping of parts by name, in the file's order), which are read one after
    the other. Anything else (a part's name, its notes) is not a batch."""
    if isinstance(chat, Mapping):
        if "turns" in chat:
            yield chat
            return
        parts: Iterable[Any] = chat.values()
    elif isinstance(chat, list):
        parts = chat
    else:
        return
    for part in parts:
        if isinstance(part, (Mapping, list)):
            yield from batches(part)


def _batch_number(value: Any, previous: int) -> int:
    """The session number of a batch: its ``batch_number`` when it is a number past the
    previous one's (parts may number their batches from 1 again), else the next."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return previous + 1
    return number if number > previous else previous + 1


def decoded(value: Any) -> Any:
    """A field as data: some copies of the dataset store ``chat`` and ``probing_questions``
    as text (JSON, or a Python literal); anything else is returned as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        pass
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise ValueError("a field holds text that is neither JSON nor a literal") from None


def parse_sample(raw: Mapping[str, Any]) -> Sample:
    sessions: list[Session] = []
    previous: datetime | None = None
    number = 0
    for batch in batches(decoded(raw.get("chat"))):
        number = _batch_number(batch.get("batch_number"), number)
        session = _session(number, batch, previous)
        sessions.append(session)
        previous = session.when
    if not sessions:
        raise ValueError(f"conversation {raw.get('sample_id', '?')!r} has no batches")
    questions: list[Question] = []
    probing = decoded(raw.get("probing_questions")) or {}
    if not isinstance(probing, Mapping):
        name = raw.get("sample_id", "?")
        raise ValueError(f"conversation {name!r}: its probing_questions are not a mapping")
    for ability in ABILITIES:
        for q in probing.get(ability) or []:
            if not isinstance(q, Mapping) or "question" not in q:
                continue
            quoted = str(q.get(_QUOTED.get(ability, ""), "") or "")
            questions.append(
                Question(str(q["question"]), ability, tuple(evidence_ids(q)), quoted, latest_ids(q))
            )
    return Sample(str(raw.get("sample_id", "")), (USER,), tuple(sessions), tuple(questions))
