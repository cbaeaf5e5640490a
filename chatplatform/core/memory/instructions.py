"""Standing instructions and preferences stated in a user's message, found without a model.

A user who says "Always include version numbers when I ask about libraries" or "I prefer
minimal dependencies" expects the assistant to remember it weeks later, whatever else the
conversation held. :func:`standing_statements` finds such sentences with fixed patterns in
the languages the token estimator knows (English, Russian, Ukrainian, German, French,
Spanish, Portuguese, Italian, Chinese, Japanese, Korean) and returns each verbatim, with
where it stands in the message: the user's own words are what is kept.

- An *instruction* tells the assistant how to answer from now on: a sentence that opens with
  "always" or "never" (after "please", "and"...), one that says "from now on", "going
  forward", "whenever I ask", or one that sets the language of the answers.
- A *preference* states what the user prefers: "I prefer", "I'd rather", "my preference
  for", "I've set a preference for"...

Deliberately narrow: a sentence about the user ("I always forget my keys") is not an
instruction, a question to the assistant about its own preference ("which do you prefer?")
and conditionals ("if I prefer tabs") are not preferences.

:func:`same_matter` tells whether a later statement is about the same matter as an earlier
one (then it replaces it): their content words mostly overlap, counted strictly.
:func:`restates` tells whether a later sentence only points back to a preference already
kept ("...considering my preference for modular design"): it adds nothing to keep.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Kind = Literal["instruction", "preference"]
INSTRUCTION: Kind = "instruction"
PREFERENCE: Kind = "preference"

#: Sentences: up to a full stop, question or exclamation mark followed by a blank (so "2.5MB"
#: and "e.g." do not end one), a CJK full stop, or a line break.
_SENTENCE = re.compile(
    r"(?:[^\n.!?。！？]|[.!?]+(?=[^\s.!?]))+(?:[.!?]+(?=\s|$)|[。！？]+|$)", re.M
)
#: Words a statement may open with before its pattern.
_LEAD = (
    r"^[\s\"'“‘(*_-]*(?:(?:please|pls|and|also|so|ok|okay|oh|btw|but|just|"
    r"пожалуйста|и|также|будь ласка|bitte|und|s'il te plaît|s'il vous plaît|et|por favor|"
    r"y|e|per favore)\b[\s,:;-]*)*"
)
_INSTRUCTION_START = re.compile(
    _LEAD + r"(?:always|never|don't ever|do not ever|make sure (?:to|you) always|be sure to always|"
    r"remember to always|from now on|going forward|from here on|"
    r"всегда|никогда|впредь|отныне|с этого момента|в дальнейшем|"
    r"завжди|ніколи|відтепер|надалі|"
    r"immer|nie|niemals|ab jetzt|von nun an|künftig|"
    r"toujours|jamais|désormais|dorénavant|à partir de maintenant|"
    r"siempre|nunca|jamás|a partir de ahora|de ahora en adelante|en adelante|"
    r"sempre|nunca|a partir de agora|daqui em diante|d'ora in poi|da ora in poi|mai)\b",
    re.IGNORECASE,
)
#: Anywhere in a sentence: it sets how answers go from now on.
_INSTRUCTION_ANYWHERE = re.compile(
    r"\b(?:from now on|going forward|from here on(?: out)?|for all future (?:answers|replies)|"
    r"(?:every time|whenever) I ask|"
    r"с этого момента|впредь|отныне|каждый раз,? когда я (?:спрашиваю|прошу)|"
    r"відтепер|щоразу,? коли я|von nun an|ab sofort|à partir de maintenant|"
    r"de ahora en adelante|a partir de ahora|d'ora in poi)\b"
    r"|(?:总是|始终|一律|以后|今后|从现在开始|从今以后|每次我问|常に|必ず|今後|これからは|항상|앞으로|언제나)",
    re.IGNORECASE,
)
#: The language of the answers: "answer me in Spanish", "reply only in German".
_LANGUAGE = re.compile(
    r"\b(?:answer|respond|reply|write|talk|speak)(?: (?:to )?me)?(?: only)? in "
    r"(?:english|russian|ukrainian|german|french|spanish|portuguese|italian|chinese|"
    r"mandarin|japanese|korean|arabic|hindi|polish|dutch|turkish|hebrew)\b"
    r"|\b(?:отвечай|пиши|говори)(?: мне)?(?: только)? на [а-яё]+ом\b",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(?:I prefer|I'd prefer|I would prefer|I'd rather|I would rather|"
    r"my (?:strong |clear |personal |own )?preference (?:is|for|would be)|"
    r"I(?:'ve| have)? (?:set|stated|expressed|made clear|got) (?:a|my) (?:strong |clear )?"
    r"preference for|"
    r"I like it (?:better )?when you|I(?: really| generally| "
    r"usually| tend to| strongly)? prefer|I favou?r|"
    r"я предпочитаю|предпочитаю|мне больше нравится|я бы предпочёл|я бы предпочла|"
    r"я віддаю перевагу|віддаю перевагу|мені більше подобається|"
    r"ich bevorzuge|mir ist [\w ]+ lieber|ich hätte lieber|je préfère|je préférerais|"
    r"j'aime mieux|prefiero|preferiría|prefiro|preferiria|preferisco|preferirei)\b"
    r"|(?:我(?:更|比较|还是)?(?:喜欢|偏好|倾向于|宁愿|宁可)|の方が好き|を好みます|"
    r"선호합니다|선호해|더 좋아)",
    re.IGNORECASE,
)
#: Not a statement of the user's own: a question about the assistant's preference, a
#: hypothesis, or the user's habits ("I always...").
_NOT_THE_USERS = re.compile(
    r"\b(?:do you prefer|would you prefer|which do you prefer|what do you prefer|"
    r"do you have a preference|your preference|what(?: is|'s) my preference|"
    r"if I (?:prefer|always|never)|suppose I|imagine I|never ?mind|always a pleasure|"
    r"(?:might|should|would|could|will|shall|do|did|can|may) I (?:\w+ )?prefer)\b",
    re.IGNORECASE,
)
#: A sentence longer than this (a run-on message, text pasted without full stops) is kept
#: as the clause that states the instruction or preference, within this length...
MAX_STATEMENT_CHARS = 600
#: ...with the clauses after it while shorter than this ("I prefer simple, minimal
#: dependencies to keep the app light").
MIN_STATEMENT_CHARS = 80
#: Where a long sentence's clauses meet: after a comma, semicolon or colon (and their CJK
#: forms, which no blank follows), around a dash.
_CLAUSE_BREAK = re.compile(r"(?<=[,;:])\s+|(?<=[，；：、])|\s+[-–—]\s+")
_CLAUSE_EDGES = " ,;:-–—，；：、"
#: A clause that turns from the statement to this message's own request ("..., can you help
#: me plan it?", "..., so how do I set it up?"): the statement ends before it, so the memory
#: holds what the user wants from now on, not what they asked that day. A doubt ("..., but
#: I'm not sure it minimises distractions") often gives the statement's reason: it stays.
_REQUEST = re.compile(
    r"[\s\"'“‘(*_¿-]*(?:(?:so|and|but|please|now|then|also|и|но|так что|und|aber|also|et|mais|"
    r"donc|y|pero|así que|e|mas|então|ma|quindi)\b[\s,]*)*"
    r"(?:(?:can|could|would|will) you\b|help me\b|how (?:do|can|should|would|could) I\b|"
    r"what(?:'s| is) the best way\b|I need (?:some |your )?help\b|"
    r"any (?:ideas|tips|suggestions|advice)\b|"
    r"можешь|можете|не могли бы|помоги|подскажи|чи можеш|допоможи|підкажи|"
    r"kannst du|können Sie|könnten Sie|hilf mir|peux-tu|pouvez-vous|pourriez-vous|aide-moi|"
    r"puedes|podrías|podría|ayúdame|você pode|podes|poderia|ajuda-me|me ajude|puoi|potresti|"
    r"aiutami|能(?:不能)?帮|可以帮|请帮|你能|手伝って|教えて|도와)",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w+")
#: Words that say nothing of a statement's matter.
_FILLER_WORDS = """a an the and or but so to of in on at for with when whenever i me my you
    your it is are
    be do does please always never ask about from now on going forward prefer rather would like
    want any all every time this that these those use include make sure answer reply respond
    give show over than more less
    ich wenn nach über frage fragen um bitte immer nie und oder der die das den dem ein eine
    je quand demande demander sur de la le les des et ou toujours jamais
    cuando pregunto pregunte sobre el los las y o siempre nunca
    quando pergunto perguntar chiedo su il o e sempre nunca mai
    когда если я спрашиваю прошу о об про и или всегда никогда
    коли питаю прошу завжди ніколи"""
_FILLER = frozenset(_FILLER_WORDS.split())
#: Content words two statements share, as a share of all the content words either has, to be
#: on one matter. Strict on purpose: a false match loses an instruction the user still wants,
#: a missed one only keeps both (the later is listed last); statements on one topic
#: ("probability") are not on one matter for sharing its words.
SAME_MATTER_OVERLAP = 0.5


#: Ends a sentence: a statement that ends so is not closed again (:attr:`Statement.text`).
_TERMINAL = ".!?。！？…"
_CJK_END = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]$")


@dataclass(frozen=True, slots=True)
class Statement:
    """A standing instruction or preference: its kind and the sentence, verbatim, with its
    offsets in the message; ``cut`` when it ends before its sentence does (a request follows,
    or it is one clause of a run-on sentence)."""

    kind: Kind
    sentence: str
    start: int
    end: int
    cut: bool = False

    @property
    def text(self) -> str:
        """The statement as it is kept and shown: the user's words, a statement cut from a
        longer sentence closed by a full stop as a sentence of its own (so one message's
        statements, joined, read as separate sentences, and a quoted clause as quoted)."""
        if self.cut and self.sentence[-1:] not in _TERMINAL:
            return self.sentence + ("。" if _CJK_END.search(self.sentence) else ".")
        return self.sentence


def _kind(sentence: str) -> Kind | None:
    if _NOT_THE_USERS.search(sentence):
        return None
    if (
        _INSTRUCTION_START.search(sentence)
        or _INSTRUCTION_ANYWHERE.search(sentence)
        or _LANGUAGE.search(sentence)
    ):
        return INSTRUCTION
    if _PREFERENCE.search(sentence):
        return PREFERENCE
    return None


def _clauses_around(sentence: str, at: int) -> tuple[int, int]:
    """The span of ``sentence`` (start, end) of the clause holding offset ``at``, with the
    clauses after it while it is shorter than :data:`MIN_STATEMENT_CHARS` and within
    :data:`MAX_STATEMENT_CHARS`; of a single clause longer than that, that many characters
    from shortly before ``at``, at words' ends."""
    bounds = [
        0,
        *(b for m in _CLAUSE_BREAK.finditer(sentence) for b in (m.start(), m.end())),
        len(sentence),
    ]
    clauses = list(zip(bounds[::2], bounds[1::2], strict=True))
    last = next(i for i, (_, end) in enumerate(clauses) if at < end or end == len(sentence))
    start, end = clauses[last]
    while (
        end - start < MIN_STATEMENT_CHARS
        and last + 1 < len(clauses)
        and clauses[last + 1][1] - start <= MAX_STATEMENT_CHARS
    ):
        last += 1
        end = clauses[last][1]
    if end - start > MAX_STATEMENT_CHARS:
        # One long clause: from a word shortly before what states it, cut at a word's end.
        lead = MAX_STATEMENT_CHARS // 5
        if at - start > lead:
            blank = sentence.find(" ", at - lead, at)
            start = blank + 1 if blank >= 0 else at
        cut = sentence.rfind(" ", start, start + MAX_STATEMENT_CHARS + 1)
        end = cut if cut > at else min(end, start + MAX_STATEMENT_CHARS)
    return start, end


def standing_statements(text: str) -> list[Statement]:
    """The standing instructions and preferences ``text`` states, in order, each sentence
    verbatim (surrounding blanks left out); of a sentence longer than
    :data:`MAX_STATEMENT_CHARS`, the clauses around each statement it makes."""
    found: list[Statement] = []
    for match in _SENTENCE.finditer(text):
        raw = match.group(0)
        sentence = raw.strip()
        if len(sentence) < 8:
            continue
        start = match.start() + raw.index(sentence)
        if len(sentence) > MAX_STATEMENT_CHARS:
            found += _long_sentence_statements(sentence, start)
        elif kind := _kind(sentence):
            stated = _before_request(sentence, _stated_at(sentence), len(sentence))
            cut = len(stated) < len(sentence)
            found.append(Statement(kind, stated, start, start + len(stated), cut))
    return found


def _stated_at(sentence: str, at: int = 0) -> tuple[int, int]:
    """Where in ``sentence`` (from offset ``at``) its instruction or preference is first
    stated: the span of the words that state it ("always", "I prefer")."""
    if (m := _INSTRUCTION_START.match(sentence[at:])) is not None:  # anchored at its start
        return at + m.start(), at + m.end()
    spans = [
        (m.start(), m.end())
        for pattern in (_INSTRUCTION_ANYWHERE, _LANGUAGE, _PREFERENCE)
        if (m := pattern.search(sentence, at)) is not None
    ]
    return min(spans, default=(at, at))


def _before_request(sentence: str, stated: tuple[int, int], end: int) -> str:
    """``sentence[:end]`` up to the first clause after the words that state it (``stated``)
    that turns to the message's own request (:data:`_REQUEST`), its edges left out; the whole
    of it when no such clause follows, or nothing would be left past those words."""
    for brk in _CLAUSE_BREAK.finditer(sentence, stated[0], end):
        if brk.start() > stated[0] and _REQUEST.match(sentence, brk.end()):
            kept = sentence[: brk.start()].rstrip(_CLAUSE_EDGES)
            if len(kept) > stated[1] + 1:
                return kept
            break
    return sentence[:end]


def _long_sentence_statements(sentence: str, offset: int) -> list[Statement]:
    """The statements of a long ``sentence`` (at ``offset`` in its message): for each place
    a pattern matches (a clause opening as an instruction does), not within the span kept
    for an earlier one, the clauses around it (:func:`_clauses_around`) when they make a
    statement."""
    # Its clauses stand as its sentences: one may open with "always" or "never".
    opening = [0, *(m.end() for m in _CLAUSE_BREAK.finditer(sentence))]
    places = sorted(
        [at for at in opening if _INSTRUCTION_START.match(sentence[at:])]
        + [
            m.start()
            for pattern in (_INSTRUCTION_ANYWHERE, _LANGUAGE, _PREFERENCE)
            for m in pattern.finditer(sentence)
        ]
    )
    out: list[Statement] = []
    covered = -1
    for at in places:
        if at < covered:
            continue
        begin, end = _clauses_around(sentence, at)
        end = len(_before_request(sentence, _stated_at(sentence, at), end))
        covered = end
        span = sentence[begin:end]
        clause = span.strip(_CLAUSE_EDGES)
        # What it states is read from where the pattern matched; what negates it ("if I
        # prefer", "might I prefer") may stand before.
        kind = None if _NOT_THE_USERS.search(clause) else _kind(sentence[at:end])
        if kind is None:
            continue
        start = offset + begin + span.index(clause)
        cut = begin + span.index(clause) + len(clause) < len(sentence)
        out.append(Statement(kind, clause, start, start + len(clause), cut))
    return out


#: Names of languages: a statement that names one is (also) about the answers' language, one
#: matter whichever language it names ("answer in Spanish" replaces "answer in German").
_LANGUAGE_NAMES = frozenset(
    [
        "english",
        "russian",
        "ukrainian",
        "german",
        "french",
        "spanish",
        "portuguese",
        "italian",
        "chinese",
        "mandarin",
        "japanese",
        "korean",
        "arabic",
        "hindi",
        "polish",
        "dutch",
        "turkish",
        "hebrew",
        "английском",
        "русском",
        "украинском",
        "немецком",
        "французском",
        "испанском",
    ]
)
LANGUAGE_MATTER = "<language>"


def matter_words(sentence: str) -> frozenset[str]:
    """The content words of a statement (lower-cased, fillers left out; a language's name
    stands as the one matter :data:`LANGUAGE_MATTER`)."""
    return frozenset(
        LANGUAGE_MATTER if w in _LANGUAGE_NAMES else w
        for w in _WORD.findall(sentence.casefold())
        if w not in _FILLER
    )


#: A preference named as one already stated rather than stated: "as per my preference for
#: X", "considering I prefer X". ``matter`` is what it names.
_REFERENCE = re.compile(
    r"\b(?:as per|per|considering|given|in line with|according to|based on|following|"
    r"due to|because of|with)\s+(?:that\s+)?(?:my|the)\s+"
    r"(?:(?:stated|earlier|previous|existing|strong|clear|personal|own)\s+)?"
    r"preference\s+(?:for|of)\s+(?P<matter>(?:[^,.;:!?]|\.(?=\S))+)"
    r"|\b(?:considering|given|since|as)\s+(?:that\s+)?I\s+(?:\w+\s+)?prefer\s+"
    r"(?P<also>(?:[^,.;:!?]|\.(?=\S))+)",
    re.IGNORECASE,
)


def referred_preference(text: str) -> str | None:
    """What ``text`` names as a preference already stated ("modular design" in "...,
    considering my preference for modular design?") when that is all it says of one; ``None``
    when it states an instruction or preference of its own, or names none."""
    match = _REFERENCE.search(text)
    if match is None:
        return None
    rest = text[: match.start()] + text[match.end() :]
    if any(_kind(s.group(0).strip()) for s in _SENTENCE.finditer(rest)):
        return None
    return (match.group("matter") or match.group("also") or "").strip() or None


def restates(earlier: str, later: str) -> bool:
    """Whether ``later`` only points back to ``earlier``: it names a preference as already
    stated (:func:`referred_preference`) and at least :data:`SAME_MATTER_OVERLAP` of the
    named matter's content words are ``earlier``'s."""
    named = referred_preference(later)
    words = matter_words(named) if named else frozenset()
    if not words:
        return False
    return len(words & matter_words(earlier)) / len(words) >= SAME_MATTER_OVERLAP


#: What a statement is for: "... when I ask about deadlines", "... whenever I request code".
_CONDITION = re.compile(
    r"\b(?:when(?:ever)?|if|every time|each time)\s+I(?:'m| am)?\s+"
    r"(?:ask|asking|request|inquire|want|need)\w*\b(?P<about>.*)"
    r"|(?:когда|если) я (?:спрашиваю|прошу|интересуюсь)(?P<ru>.*)|коли я (?:питаю|прошу)(?P<uk>.*)"
    r"|wenn ich (?:nach|frage|um)(?P<de>.*)|quand je (?:demande|pose|pose des questions)(?P<fr>.*)"
    r"|cuando (?:pregunte|pregunto|pida|pido)(?P<es>.*)"
    r"|quando (?:pergunto|perguntar|peço|pedir|chiedo)(?P<pt>.*)",
    re.IGNORECASE | re.DOTALL,
)


def _condition(statement: str) -> frozenset[str]:
    """The content words of what ``statement`` says it is for (after "when I ask about"),
    empty when it names no such condition."""
    m = _CONDITION.search(statement)
    if m is None:
        return frozenset()
    return matter_words(next((g for g in m.groups() if g is not None), ""))


def same_matter(earlier: str, later: str) -> bool:
    """Whether ``later`` is about the same matter as ``earlier`` (it then replaces it): they
    share at least :data:`SAME_MATTER_OVERLAP` of the content words either has, and do not
    name conditions that share no word ("...when I ask about deadlines" and "...when I ask
    about timeline details" are two instructions, each for its own questions)."""
    when_a, when_b = _condition(earlier), _condition(later)
    if when_a and when_b and not when_a & when_b:
        return False
    a, b = matter_words(earlier), matter_words(later)
    if not a or not b:
        return False
    return len(a & b) / len(a | b) >= SAME_MATTER_OVERLAP
