"""The search query built from a new message. Pure: nothing here imports Django.

Text in any language becomes a small set of :class:`Term` s, OR-ed together and ranked by the
database (IDF-weighted term presence on PostgreSQL, ``bm25()`` on SQLite) and then by
:mod:`chats.retrieval.rerank`:

* normalisation: NFC, ``lower()``, and :data:`FOLD_FROM` → :data:`FOLD_TO` (accents of Latin
  letters and ``ё`` dropped), exactly what the PostgreSQL ``search_vector`` column applies, so
  ``cafe`` finds ``café`` on both backends;
* words: runs of letters and digits (underscore and punctuation split them, as the database
  parsers do); Han, Kana and Hangul are split into characters in the index, and queried as
  **character bigrams** (a phrase of two adjacent characters), so unsegmented Chinese or
  Japanese and particle-glued Korean match by shared bigrams;
* stop words of en, ru, uk, de, fr, es, pt, it: Cyrillic lists always apply; among the
  Latin-script lists only those of the language(s) the query looks like (most stop-word hits)
  apply, so English ``son``/``war``/``die`` stay searchable in an English query. The English
  list also holds the verbs that frame reported speech (``say``, ``tell``, ``think``): in
  "What does Jon tell Gina he won't do?" they name the act of saying, which every message of
  a chat is, not its content (measured in ``tooling/evaluation/retrieval.md``);
* light stemming: a known inflectional suffix is stripped (leaving a stem of at least
  :data:`MIN_STEM` characters) and the stem is searched as a prefix (``paint:*`` /
  ``"paint"*``), which finds ``paints``, ``painted``, ``painting``.

In a long conversation the terms found in a large share of its messages are matched only
among its newest ones (:func:`whole_history_terms`, document-frequency pruning: the rule the
PostgreSQL search and the offline evaluation share).

The rendered queries contain only letters and digits inside quotes plus the operators this
module writes, so no user text can produce a syntax error or an injection in either dialect.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

#: Accent folding shared with the PostgreSQL generated column (``translate(lower(content),
#: FOLD_FROM, FOLD_TO)``; migration 0002 holds a copy and a test checks they are equal).
FOLD_FROM = "àáâãäåāăąçćĉċčďđèéêëēĕėęěĝğġģĥħìíîïĩīĭįıĵķĺļľłñńņňòóôõöøōŏőŕŗřśŝşšţťùúûüũūŭůűųýÿŷźżžё"
FOLD_TO = "aaaaaaaaacccccddeeeeeeeeegggghhiiiiiiiiijkllllnnnnooooooooorrrssssttuuuuuuuuuuyyyzzzе"
_FOLD = dict(zip(FOLD_FROM, FOLD_TO, strict=True))
#: The characters :func:`fold` rewrites: found by one scan, replaced one by one (most text
#: has none or a few; ``str.translate`` looks every character up instead).
_FOLDED_CHAR = re.compile(f"[{FOLD_FROM}]")

#: Characters indexed one by one (Han, Kana, Hangul): the PostgreSQL column puts spaces around
#: each; the query matches them as bigram phrases.
CJK_RANGES = (
    ("\u3040", "\u30ff"),  # Hiragana, Katakana
    ("\u3400", "\u4dbf"),  # CJK Extension A
    ("\u4e00", "\u9fff"),  # CJK Unified Ideographs
    ("\uac00", "\ud7af"),  # Hangul syllables
    ("\uf900", "\ufaff"),  # CJK Compatibility Ideographs
)
_CJK_CLASS = "".join(f"{a}-{b}" for a, b in CJK_RANGES)
_CJK = re.compile(f"[{_CJK_CLASS}]")
_WORD = re.compile(r"[^\W_]+")
#: One word of :func:`words_of`: a Han/Kana/Hangul letter alone, or a run of other letters
#: and digits (what splitting each ``_WORD`` at its CJK characters gives, in one scan).
_TOKEN = re.compile(f"(?=[^\\W_])(?:[{_CJK_CLASS}]|[^\\W_{_CJK_CLASS}]+)")
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_LATIN = re.compile(r"[a-z]")
_DIGITS = re.compile(r"\d+")

#: Latin-script languages whose stop lists and suffixes apply only when the query looks like
#: them (most stop-word hits; all of them when none has any).
LATIN_LANGUAGES = ("en", "de", "fr", "es", "pt", "it")
#: Longest query (characters) looked at, and most terms kept: bounds the SQL.
MAX_QUERY_CHARS = 4000
MAX_TERMS = 32
#: A stem shorter than this is not cut further (prefix search on 2-letter stems is noise).
MIN_STEM = 4
MIN_STEM_CYRILLIC = 3

#: Inflectional suffixes per Latin-script language (accent-folded), stripped longest first.
_LATIN_SUFFIXES: dict[str, tuple[str, ...]] = {
    "en": ("ations", "ation", "ions", "ion", "ingly", "ments", "ment", "ness", "ings", "ing",
           "ied", "ies", "ers", "ed", "es", "er", "ly", "s", "e", "y"),
    "de": ("ungen", "ung", "heit", "keit", "lich", "ern", "en", "er", "es", "e", "n", "s"),
    "fr": ("ements", "ement", "ations", "ation", "ions", "ion", "ees", "ee", "es", "er", "ez",
           "e", "s"),
    "es": ("amente", "mente", "ciones", "cion", "idades", "idad", "os", "as", "es", "a", "o",
           "s"),
    "pt": ("amente", "mente", "coes", "cao", "idades", "idade", "os", "as", "es", "a", "o", "s"),
    "it": ("amente", "mente", "zioni", "zione", "ita", "i", "e", "a", "o"),
}  # fmt: skip
_CYRILLIC_SUFFIXES = sorted(
    {
        "иями", "ями", "ами", "ого", "его", "ому", "ему", "ыми", "ими", "ией", "иях", "иям",
        "ться", "ать", "ять", "ить", "еть", "ешь", "ишь", "ет", "ит", "ют", "ут", "ат", "ят",
        "ая", "яя", "ое", "ее", "ые", "ие", "ий", "ый", "ой", "ей", "ую", "юю", "ом", "ем",
        "ам", "ям", "ах", "ях", "ов", "ев", "ів", "ти", "ть", "ся", "сь", "ла", "ли", "ло",
        "а", "я", "о", "е", "ы", "и", "у", "ю", "ь", "й", "і", "ї", "є",
    },
    key=len,
    reverse=True,
)  # fmt: skip

_STOP_WORDS_RAW: dict[str, str] = {
    "en": """a about above after again against all also am an and any are aren as at be because
        been before being below between both but by can cannot could couldn did didn do does
        doesn doing don down during each else ever few for from further get gets got had hadn
        has hasn have haven having he her here hers herself hey hi him himself his how i if im
        in into is isn it its itself ive just let ll me might more most much must my myself no
        nor not now of off oh ok okay on once only or other our ours ourselves out over own re
        really same shall she should so some such than that thats the their theirs them
        themselves then there these they this those through to too under until up upon us ve
        very was wasn we were weren what whats when where which while who whom whose why will
        with won would wouldn yeah yes yet you your yours yourself yourselves
        say says said tell tells told think thinks thought""",
    "de": """aber alle als am an auch auf aus bei bin bis bist da dann das dass dein deine dem
        den denn der des dich die dir doch du durch ein eine einem einen einer eines er es
        euch euer für hab habe haben hat hatte ich ihm ihn ihr im in ist ja jetzt kann kein
        keine mal man mein meine mich mir mit nach nein nicht noch nur ob oder schon sehr sein
        seine sich sie sind so über um und uns unser unter vom von vor wann war waren warum
        was weil welche welcher welches wenn wer wie wir wird wo zu zum zur""",
    "fr": """a ai as au aux avec avez avoir c ce ces cet cette comme comment d dans de des du
        elle elles en est et été être il ils j je l la le les leur leurs lui m ma mais me mes
        moi mon n ne nos notre nous on ont ou où par pas plus pour pourquoi qu quand que quel
        quelle qui quoi s sa se ses si son sont sur t ta te tes toi ton tu un une vos votre
        vous y""",
    "es": """a al algo cómo como con cuál cuando cuándo de del donde dónde el él ella ellas
        ellos en era es esa ese eso esta está están este esto fue ha han hay la las le les lo
        los me mi mis muy más nada ni no nos o para pero por porque qué que quién se sin sobre
        su sus también te tu tú un una unas uno unos y ya yo""",
    "pt": """a ao aos as até com como da das de do dos e é ela elas ele eles em entre era essa
        esse está estão eu foi há isso isto já lhe mais mas me meu minha muito na nas não no
        nos nós o os ou para pela pelo por porque quando que quem se sem seu sua são também te
        tu um uma você""",
    "it": """a ad al alla anche che chi ci come con cosa da dal della delle dei di dove e è ed
        era gli ha hai hanno ho i il in io la le lei li lo loro lui ma mi mia mio ne nel nella
        noi non o per perché più quando quale quello questo se si sono su sua suo ti tra tu un
        una uno voi""",
    "ru": """а без более бы был была были было быть в вам вас весь во вот все всё всего всех вы
        где да даже для до его ее её ей ему если есть еще ещё же за здесь и из или им их к как
        какая какой когда кто куда ли либо мне много может мой моя мы на над надо наш не него
        нее неё нет ни них но ну о об он она они оно от очень по под после потом потому почему
        при про раз с сам свой себе себя со так также там тебе тебя то тоже того только тот ты
        у уже хотя чего чем что чтобы эта эти это этот я""",
    "uk": """а або але без би б був була були було бути в вам вас ви від він вона вони воно все
        всі де для до є же з за зі і із її їх й коли котрий куди ли мене мені ми мій моя на
        над наш не нас ні но о от по при про та так також там те тебе ти то тобі тут у уже хто
        це цей ці цю чи чому що як яка який які""",
}


def fold(text: str) -> str:
    """NFC, ``lower()`` and accent folding: the normal form both sides are compared in."""
    if text.isascii():  # NFC and the fold table change no ASCII character
        return text.lower()
    lowered = unicodedata.normalize("NFC", text).lower()
    return _FOLDED_CHAR.sub(_fold_char, lowered)


def _fold_char(match: re.Match[str]) -> str:
    return _FOLD[match.group()]


STOP_WORDS: dict[str, frozenset[str]] = {
    lang: frozenset(fold(w) for w in words.split()) for lang, words in _STOP_WORDS_RAW.items()
}
ALL_STOP_WORDS: frozenset[str] = frozenset().union(*STOP_WORDS.values())


@functools.cache
def _latin_suffixes(languages: tuple[str, ...]) -> tuple[str, ...]:
    found = {x for lang in languages for x in _LATIN_SUFFIXES.get(lang, ())}
    return tuple(sorted(found, key=len, reverse=True))


def stem(word: str, languages: Iterable[str] = LATIN_LANGUAGES) -> str:
    """``word`` without one inflectional suffix (the longest of the ``languages``' Latin
    suffixes, or a Russian/Ukrainian one), never shorter than the script's minimum stem; a
    plural ``-s`` may leave 3 letters (``kids`` → ``kid``). Digits and other scripts are
    returned unchanged."""
    if _CYRILLIC.match(word):
        suffixes: Iterable[str] = _CYRILLIC_SUFFIXES
        minimum = MIN_STEM_CYRILLIC
    elif _LATIN.match(word) and word.isalpha():
        suffixes = _latin_suffixes(tuple(languages))
        minimum = MIN_STEM
    else:
        return word
    for suffix in suffixes:
        if not word.endswith(suffix):
            continue
        root = word[: -len(suffix)]
        if len(root) >= minimum or (suffix == "s" and len(root) >= 3 and not root.endswith("s")):
            return root
    return word


@dataclass(frozen=True, slots=True)
class Term:
    """One OR-ed part of the query.

    ``text`` is folded; ``prefix`` makes it match any word starting with it; ``bigram`` terms
    are two adjacent CJK characters (matched as a phrase); ``weight`` scales its score.
    """

    text: str
    prefix: bool = False
    bigram: bool = False
    weight: float = 1.0

    def matches(self, token: str) -> bool:
        """Whether a folded document word matches this (non-bigram) term."""
        return token.startswith(self.text) if self.prefix else token == self.text


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """The terms of a search; ``words`` are the kept (folded, unstemmed) query words, which
    the re-ranker compares with participants' names."""

    terms: tuple[Term, ...] = ()
    words: tuple[str, ...] = field(default=(), compare=False)
    #: Who the question speaks of, by its pronouns (:func:`persons_of`): ``"asker"`` (I,
    #: my: what the asker said or did), ``"addressee"`` (you, your: what the one asked
    #: said), ``"both"``, or ``None``.
    person: str | None = field(default=None, compare=False)
    #: Whether the question asks what the one asked said or did before (``How did you
    #: recommend...``, ``Was hast du mir geraten?``: :func:`recalls_reply`): its answer is
    #: the platform's own reply, which the prompt must then show whole.
    recalls_reply: bool = field(default=False, compare=False)

    @property
    def is_empty(self) -> bool:
        return not self.terms

    def without(self, texts: Iterable[str]) -> SearchQuery:
        """The query without the terms whose text (or the stem of it) is in ``texts``."""
        drop = {fold(t) for t in texts}
        drop |= {stem(t) for t in drop}
        kept = tuple(t for t in self.terms if t.text not in drop)
        return SearchQuery(kept, self.words, self.person, self.recalls_reply)

    def tsquery(self) -> str:
        """PostgreSQL ``to_tsquery('simple', ...)`` text: ``'a':* | 'b' | '中' <-> '文'``."""
        return " | ".join(term_tsquery(t) for t in self.terms)

    def fts5(self) -> str:
        """SQLite FTS5 expression for the ``body`` column: ``"a"* OR "b"``. Bigram terms are
        left out: the SQLite index keeps CJK runs whole (see ``search``)."""
        return " OR ".join(term_fts5(t) for t in self.terms if not t.bigram)


def term_tsquery(term: Term) -> str:
    if term.bigram:
        return f"'{term.text[0]}' <-> '{term.text[1]}'"
    return f"'{term.text}':*" if term.prefix else f"'{term.text}'"


def term_fts5(term: Term) -> str:
    return f'"{term.text}"*' if term.prefix else f'"{term.text}"'


def words_of(text: str) -> list[str]:
    """Folded words of ``text`` (letters and digits; CJK runs split into characters)."""
    return _TOKEN.findall(fold(text))


def folded_words(folded: str) -> list[str]:
    """:func:`words_of` of text already :func:`fold`-ed."""
    return _TOKEN.findall(folded)


def detect_stop_languages(words: Iterable[str]) -> tuple[str, ...]:
    """Latin-script languages whose stop lists apply: those with the most stop-word hits
    (all of them when none has any)."""
    hits = dict.fromkeys(LATIN_LANGUAGES, 0)
    for w in words:
        for lang in LATIN_LANGUAGES:
            if w in STOP_WORDS[lang]:
                hits[lang] += 1
    best = max(hits.values())
    if best == 0:
        return LATIN_LANGUAGES
    return tuple(lang for lang, n in hits.items() if n == best)


def stop_words_for(languages: Iterable[str]) -> frozenset[str]:
    out: set[str] = set(STOP_WORDS["ru"] | STOP_WORDS["uk"])
    for lang in languages:
        out |= STOP_WORDS[lang]
    return frozenset(out)


def build_query(text: str, *, max_terms: int = MAX_TERMS) -> SearchQuery:
    """The search query for ``text`` (any language). Empty when nothing searchable is left
    (only stop words, punctuation or single characters)."""
    text = text[:MAX_QUERY_CHARS]
    folded = fold(text)
    raw = _WORD.findall(folded)
    latin_words = [w for w in raw if not _CJK.search(w)]
    languages = detect_stop_languages(latin_words)
    stop = stop_words_for(languages)
    terms: dict[str, Term] = {}
    kept_words: list[str] = []
    for word in raw:
        if _CJK.search(word):
            for part in _split_cjk_runs(word):
                for term in _cjk_terms(part, languages):
                    terms.setdefault(term.text, term)
            continue
        if word in stop or len(word) < 2:
            continue
        if _DIGITS.fullmatch(word):
            terms.setdefault(word, Term(word))
        else:
            root = stem(word, languages)
            terms.setdefault(root, Term(root, prefix=len(root) >= 3))
        kept_words.append(word)
    return SearchQuery(
        tuple(list(terms.values())[:max_terms]),
        tuple(kept_words),
        persons_of(raw),
        recalls_reply(raw),
    )


#: First-person singular subject pronouns and possessives (folded) of the stop lists'
#: languages, and the second person's: how a question says it is about what its asker said
#: or did (``did I say``, ``my project``; not the object of a request, ``show me``) or
#: about what the one it asks said (``what did you recommend``).
_PERSON_WORDS_RAW: dict[str, str] = {
    "asker": """i my mine myself ive ich mein meine meinen meinem meiner meins je j mon mes
        yo mi mis eu meu minha meus minhas io mio mia miei mie я мой моя моё мое мои моего
        моей моему моих мій моє мої моєї моїх""",
    "addressee": """you your yours yourself youre youve dich dir dein deine deinen deinem
        deiner tu toi ton ta tes vous votre vos ti tuyo tus te teu tua teus tuas tuo tuoi
        ты тебя тебе тобой твой твоя твоё твое твои вы вас вам ваш ваша ваше ваши ти тобі
        твій твоє твої""",
}
_ASKER_WORDS = frozenset(fold(w) for w in _PERSON_WORDS_RAW["asker"].split())
_ADDRESSEE_WORDS = frozenset(fold(w) for w in _PERSON_WORDS_RAW["addressee"].split())


def persons_of(words: Iterable[str]) -> str | None:
    """Who folded question ``words`` speak of: ``"asker"`` (first person), ``"addressee"``
    (second person), ``"both"`` or ``None``."""
    seen = set(words)
    asker = not seen.isdisjoint(_ASKER_WORDS)
    addressee = not seen.isdisjoint(_ADDRESSEE_WORDS)
    if asker and addressee:
        return "both"
    return "asker" if asker else "addressee" if addressee else None


#: A past tense's auxiliary followed by the second person (folded word pairs, in the stop
#: lists' languages where the pronoun is written): how a question asks what the one asked
#: said or did before (``did you suggest``, ``hast du empfohlen``, ``avez-vous conseillé``)
#: rather than for advice now (``what would you suggest``).
_PAST_ADDRESS_RAW = """did you, have you, had you, hast du, hattest du, haben sie, hatten sie,
    as tu, avez vous, tu as, vous avez"""
_PAST_ADDRESS: frozenset[tuple[str, ...]] = frozenset(
    tuple(fold(w) for w in pair.split()) for pair in _PAST_ADDRESS_RAW.split(",")
)


def recalls_reply(words: Sequence[str]) -> bool:
    """Whether folded question ``words`` ask what the one asked said or did before: an
    auxiliary of the past followed by the second person, or the French order
    (:data:`_PAST_ADDRESS`: ``did you``, ``tu as``)."""
    return any(pair in _PAST_ADDRESS for pair in itertools.pairwise(words))


def _split_cjk_runs(word: str) -> list[str]:
    """A word split into CJK runs and non-CJK parts (kept whole)."""
    parts: list[str] = []
    pos = 0
    for run in _CJK_RUN.finditer(word):
        if run.start() > pos:
            parts.append(word[pos : run.start()])
        parts.append(run.group())
        pos = run.end()
    if pos < len(word):
        parts.append(word[pos:])
    return parts


def _cjk_terms(part: str, languages: Iterable[str]) -> list[Term]:
    if not _CJK.match(part):
        if len(part) >= 2 and part not in ALL_STOP_WORDS:
            return [Term(stem(part, languages), prefix=len(part) >= 3)]
        return []
    if len(part) == 1:
        return [Term(part)]
    return [Term(part[i : i + 2], bigram=True) for i in range(len(part) - 1)]


def estimated_matches(hits: int, *, sampled: int, total: int) -> float:
    """A term's matches in a conversation of ``total`` messages, estimated from its
    ``hits`` among the newest ``sampled`` (exact when the sample is the whole
    conversation)."""
    if sampled <= 0:
        return 0.0
    return hits * max(total, sampled) / sampled


def whole_history_terms(
    hits: Sequence[int], *, sampled: int, total: int, scan_limit: int
) -> frozenset[int]:
    """Which terms (their indexes) a search matches over the whole conversation, the others
    only among its newest ``sampled`` messages: document-frequency pruning.

    A search reads every match of its terms to keep the newest ``scan_limit``, and a word
    found in a large share of a long conversation (``decide``, ``release``) makes most of
    the matches while BM25 gives it little weight; a rare word's old matches are what the
    newest ``scan_limit`` would cut. So terms are taken rarest first (their matches
    estimated from ``hits``, their matches among the newest ``sampled`` messages) while the
    estimated matches of the taken ones stay within ``scan_limit``; the rest are matched
    only among the sampled messages, where the newest of their matches are. Every term is
    kept (nothing pruned) when all of them fit, when the conversation holds no more than
    ``scan_limit`` messages (the scan keeps all its matches), and when even the rarest term
    alone does not fit (every term is common: the search reads them all, as without
    pruning)."""
    if max(total, sampled) <= scan_limit:
        return frozenset(range(len(hits)))
    indexes = sorted(range(len(hits)), key=lambda i: (hits[i], i))
    estimates = [estimated_matches(n, sampled=sampled, total=total) for n in hits]
    kept: set[int] = set()
    taken = 0.0
    for i in indexes:
        if taken + estimates[i] > scan_limit:
            break
        kept.add(i)
        taken += estimates[i]
    if not kept:
        return frozenset(range(len(hits)))
    return frozenset(kept)
