"""Facts the offline provider saves: plainly stated first-person facts in the user's message.

The offline provider is not a language model, yet a user who tells it "I live in Lisbon"
should see memory work. :func:`stated_facts` finds such statements with fixed patterns and
returns each as the ``save_user_fact`` input a model would send: a short third-person
sentence and, where the subject has one value at a time (a name, a home city), a ``key`` so
that a newer statement replaces the older one.

Deliberately narrow: a clause counts only when it *starts* with one of the patterns below.
Questions ("what is my name?"), conditionals and make-believe ("if I lived in Lisbon",
"imagine my name is Bob"), negations and reported speech save nothing. Nor does a clause
that states a standing instruction or preference ("From now on, answer in Spanish", "I
prefer minimal dependencies"): the memory kinds that keep those in the user's own words
(:mod:`chatplatform.core.memory.kinds`) notice it, so it is not saved again as a fact.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from chatplatform.core.memory.kinds import standing_statements_in

#: Longest value kept from a statement, in characters (a fact is short).
MAX_VALUE_CHARS = 80

#: Words that make a sentence a question, a wish, a hypothesis or a negation.
_NOT_A_STATEMENT = re.compile(
    r"\b(?:if|would|wouldn't|could|might|maybe|perhaps|suppose|supposing|imagine|pretend|"
    r"hypothetically|wish|pretending|roleplay|role-play|not|never|no longer|cannot|"
    r"what|who|where|when|why|how|which|whether|do you|did you|can you|does)\b|n't\b",
    re.IGNORECASE,
)
#: Greetings and fillers a statement may open with ("Hi, I'm Ana").
_LEAD = re.compile(
    r"^(?:(?:hi|hello|hey|well|also|and|so|oh|ok|okay|btw|by the way|fyi|actually|"
    r"just so you know|for the record|for context)\b[\s,!:-]*)+",
    re.IGNORECASE,
)
#: A group chat's author label and a reply's quote, before the message's own text.
_FRAME = re.compile(r'^\s*(?:\[[^\]\n]{0,200}\]\s*)?(?:\(reply to: "[^"\n]*"\)\s*)?:?\s*')
_SENTENCES = re.compile(r"[^.!?;\n]+[.!?;]*")
#: Where one sentence holds two statements: "I'm Ana and I live in Lisbon".
_CLAUSES = re.compile(
    r"\s*(?:,|\band\b|\bbut\b|\balso\b)\s+(?=(?:i|i'm|im|i am|my|call me)\b)", re.IGNORECASE
)
_PRONOUNS = {"it", "that", "this", "them", "those", "these", "you", "him", "her", "one"}
_NAME = r"(?P<value>[^\W\d_][\w'-]*(?:\s+[^\W\d_][\w'-]*){0,3})"
_REST = r"(?P<value>.+)"
_I_AM = r"(?:i\s*'?\s*m|im|i am)"


@dataclass(frozen=True)
class StatedFact:
    """One fact as the ``save_user_fact`` tool takes it."""

    text: str
    key: str | None = None

    def tool_input(self) -> dict[str, str]:
        return {"text": self.text} if self.key is None else {"text": self.text, "key": self.key}


def _name(value: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in value.split())


def _slug(value: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", value.casefold()).strip("_")[:40]


Rule = tuple[re.Pattern[str], Callable[[str], StatedFact]]


def _rule(pattern: str, make: Callable[[str], StatedFact]) -> Rule:
    return re.compile(rf"^{pattern}$", re.IGNORECASE), make


_RULES: tuple[Rule, ...] = (
    _rule(
        rf"(?:my name is|my name's|{_I_AM} called) {_NAME}",
        lambda v: StatedFact(f"The user's name is {_name(v)}.", "name"),
    ),
    _rule(
        rf"(?:please )?call me {_NAME}",
        lambda v: StatedFact(f"The user wants to be called {_name(v)}.", "preferred_name"),
    ),
    _rule(
        rf"(?:i live|i'm living|i am living|{_I_AM} based|i reside) in {_REST}",
        lambda v: StatedFact(f"The user lives in {v}.", "home_city"),
    ),
    _rule(
        rf"(?:{_I_AM} from|i come from) {_REST}",
        lambda v: StatedFact(f"The user is from {v}.", "origin"),
    ),
    _rule(
        rf"{_I_AM} allergic to {_REST}",
        lambda v: StatedFact(f"The user is allergic to {v}.", f"allergy_{_slug(v)}"),
    ),
    _rule(
        rf"(?:i work as|{_I_AM} working as) {_REST}",
        lambda v: StatedFact(f"The user works as {v}.", "occupation"),
    ),
    _rule(
        rf"(?:i work|{_I_AM} working) (?:at|for) {_REST}",
        lambda v: StatedFact(f"The user works at {v}.", "employer"),
    ),
    _rule(
        rf"{_I_AM} (?P<value>\d{{1,3}}) (?:years old|years of age|yo)",
        lambda v: StatedFact(f"The user is {v} years old.", "age"),
    ),
    _rule(
        rf"{_I_AM} (?:an? )?(?P<value>vegetarian|vegan|pescatarian)",
        lambda v: StatedFact(f"The user is {v.casefold()}.", "diet"),
    ),
    _rule(r"i speak (?P<value>.+)", lambda v: StatedFact(f"The user speaks {v}.")),
    _rule(
        r"i (?P<verb>like|love|enjoy|hate|dislike) (?P<value>.+)",
        lambda v: StatedFact(f"The user {v}."),
    ),
    _rule(
        r"my (?P<attr>favou?rite [a-z]+(?: [a-z]+)?|birthday|pronouns|native language|"
        r"first language|time ?zone|hometown|(?:wife|husband|partner|son|daughter|dog|cat|"
        r"brother|sister|mother|father|mom|mum|dad)'s name) (?:is|are) (?P<value>.+)",
        lambda v: StatedFact(f"The user's {v}."),
    ),
)


def stated_facts(message: str) -> list[StatedFact]:
    """The facts ``message`` plainly states about its author, in the order stated."""
    facts: list[StatedFact] = []
    body = _FRAME.sub("", message, count=1)
    for match in _SENTENCES.finditer(body):
        sentence = match.group().strip()
        if sentence.endswith("?") or _NOT_A_STATEMENT.search(sentence):
            continue
        for clause in _CLAUSES.split(sentence.rstrip(".!;").strip()):
            fact = _clause_fact(_LEAD.sub("", clause.strip()).strip(" ,"))
            if fact is not None and fact not in facts:
                facts.append(fact)
    return facts


def _clause_fact(clause: str) -> StatedFact | None:
    clause = " ".join(clause.replace("’", "'").split())
    if standing_statements_in(clause):
        return None  # kept as an instruction or preference, in the user's words
    for pattern, make in _RULES:
        match = pattern.match(clause)
        if match is None:
            continue
        value = _value(match.group("value"))
        if value is None:
            return None
        groups = match.groupdict()
        if groups.get("verb"):
            value = f"{groups['verb'].casefold()}s {value}"
        elif groups.get("attr"):
            value = f"{groups['attr'].casefold()} is {value}"
        return make(value)
    return None


def _value(raw: str) -> str | None:
    """The statement's object in third person, or None when it says nothing durable."""
    words = raw.strip(" ,.!;:\"'").split()
    if not words or words[0].casefold() in _PRONOUNS:
        return None
    third = {"my": "their", "me": "them", "mine": "theirs", "myself": "themselves"}
    value = " ".join(third.get(w.casefold(), w) for w in words)
    if len(value) > MAX_VALUE_CHARS or re.search(r"\bi\b|\bi'", value, re.IGNORECASE):
        return None
    return value
