"""Cheap text features that predict BPE token counts, in any script.

:func:`extract_features` returns one number per name in :data:`FEATURE_NAMES`; the token
estimator is a non-negative linear model over them. Everything runs at C speed, never in a
per-character Python loop:

- Words are the UTF-8 text split on whitespace, ASCII punctuation and digits. A word the
  *lexicon* holds (words the reference BPE encodes whole) costs about one token; the other
  words are measured by script, length and case.
- Per-character properties become *bit planes*: ``bytes.translate`` maps every character
  (its UTF-8 lead byte; continuation bytes are deleted) to a digit whose bits are the
  properties, and ``int(digits, 32)`` packs them (five bits a character, for the letters
  of unknown words and for the shape of the whole text). Runs, pairs and "followed by" relations
  are then a few shifts, ands and ``int.bit_count()`` calls on one big integer. The first
  character is the most significant digit, so with ``b`` bits per character ``x << b``
  aligns each character with its successor and ``x >> b`` with its predecessor.
- Scripts are told apart by UTF-8 lead byte (by second byte where scripts share one), and
  only the classes present in a text are visited.

Speed, for a sense of scale: about 22-32 MB/s of chat-sized mixed text on one core, about
1.6x the native BPE of ``bpe-openai`` (which does not speed up on repeated text: the same
texts and never-seen ones time alike). Measured on the dev corpus (657 texts of ~1.2 KB, 20
languages) against the reference in the same run, as shares of the reference's time:
encoding, the word split and its translate take ~10 %; looking every word up in the lexicon
frozenset (~104,000 words) another ~16 % (~75 ns a word: hashing, and ~35 ns of cache misses,
since a 3,000-word set costs ~19 % in all), so split, lookups and joining the unknown words
are ~25 % before any feature is computed, and 3x the reference would leave ~8 % (~5 us a
text) for every feature. The shape bit planes alone cost ~13 % (``int(digits, 32)`` ~1 us a
KB, each ``bit_count`` or shift of a text-sized integer 0.15-0.4 us), the features of unknown
words ~15-20 %. What was tried and dropped (cross-validated corpus MAPE, 4.2-4.3 % with the
full lexicon): looking up every second word and scaling (5.1-5.5 %); the 5,000 / 20,000 /
40,000 lowest-ranked BPE words as lexicon (6.0 / 5.5 / 4.9 %); features from counts and word
lengths only, no bit planes (5.8 %, Russian 8.7 %); without the lexicon 8-9 %. Cheaper
lookups did not exist at C speed: a dict of per-word corrections (``sum(filter(None,
map(dict.get, words)))``) costs more than the frozenset filter, ``set.intersection`` loses
repeated words, a regex picking out long words costs more than the split, and a hashed bitmap
read with ``operator.itemgetter`` more than the set. So no pure-Python estimator with this
lexicon reaches 3x the reference; the lexicon stays for accuracy.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection
from itertools import filterfalse

from .byte_classes import (
    CASE_TABLE,
    CLASS_TABLES,
    CONTINUATION_BYTES,
    CYRILLIC_TABLE,
    IDENTIFIER_PART,
    KANA_TABLE,
    LETTER_TABLES,
    PERCENT_ESCAPE,
    RUN_TABLE,
    SCRIPT_OF_CLASS,
    SHAPE_TABLES,
    SHARED_LEADS,
    WORD_TABLE,
    Variant,
    low_bits,
)

# Letter scripts besides Latin and CJK, measured on out-of-lexicon words.
SCRIPTS = (
    "cyrillic",
    "greek",
    "armenian",
    "georgian",
    "hebrew",
    "arabic",
    "devanagari",
    "indic",
    "thai",
    "hangul",
    "other",
)

FEATURE_NAMES: tuple[str, ...] = (
    # words, split on whitespace, ASCII punctuation and digits
    "lexicon_words",
    "oov_words",
    "camel_humps",
    # Latin letters of out-of-lexicon words
    "latin_chars",
    "latin_upper",
    "latin_accented",
    "latin_extended",
    "latin_runs_ge4",
    "latin_runs_ge8",
    "latin_runs_ge12",
    # other letter scripts of out-of-lexicon words
    *(f"{script}_{part}" for script in SCRIPTS for part in ("chars", "runs")),
    "cyrillic_extended",
    # URL-encoded bytes (%D0%B8), taken out of the text before everything else
    "percent_escapes",
    "han_chars",
    "kana_chars",
    "cjk_runs",
    # non-ASCII symbols
    "latin1_symbols",
    "general_symbols",
    "cjk_punct",
    "fullwidth_forms",
    "astral_chars",
    # digits: BPE splits a digit run into groups of up to three
    "digit_runs",
    "digit_runs_ge4_ge7",
    "digit_runs_ge10",
    # punctuation runs are pre-tokens, often merged with the letter or newlines after them
    "punct_runs_before_letter",
    "punct_runs_before_newline",
    "punct_runs_other",
    # whitespace
    "space_runs_ge2",
    "newline_runs_not_after_punct",
    "newlines",
    "tabs",
)

_I = FEATURE_NAMES.index
_WORDS = _I("lexicon_words")
_LATIN = _I("latin_chars")
_CJK = _I("han_chars")
_SYMBOLS = _I("latin1_symbols")
_DIGITS = _I("digit_runs")
_PUNCT = _I("punct_runs_before_letter")
_SPACES = _I("space_runs_ge2")
_SCRIPT_INDEX = {script: _I(f"{script}_chars") for script in SCRIPTS}
_CYRILLIC_EXTENDED = _I("cyrillic_extended")
_ESCAPES = _I("percent_escapes")
_SYMBOL_INDEX = {b"s": _SYMBOLS, b"y": _SYMBOLS + 1, b"f": _SYMBOLS + 3, b"q": _SYMBOLS + 4}


def extract_features(text: str, lexicon: Collection[bytes]) -> list[float]:
    """Features of ``text`` in :data:`FEATURE_NAMES` order; every value is >= 0.

    ``lexicon`` holds UTF-8 words. Features add up over concatenation except at the seam,
    where a word, run or pair may be cut in two: for ``a + b`` each feature differs from the
    sum of the parts' by at most 1, and ``camel_humps``/script shares by a few.
    """
    features = [0.0] * len(FEATURE_NAMES)
    if not text:
        return features
    if text.isascii():
        raw = text.encode("ascii")
        variant = (False, False)
        delete = b""
    else:
        raw = text.encode("utf-8", "surrogatepass")
        variant = _variant(raw)
        delete = CONTINUATION_BYTES
    if b"%" in raw:  # URL-encoded bytes cost about two tokens each, whatever they spell
        raw, escapes = PERCENT_ESCAPE.subn(b"", raw)
        features[_ESCAPES] = escapes
        if not raw:
            return features
    words = raw.translate(WORD_TABLE).split()
    oov_words = list(filterfalse(lexicon.__contains__, words))
    features[_WORDS] = len(words) - len(oov_words)
    if oov_words:
        if delete:
            _word_features(oov_words, lexicon, variant, delete, features)
        else:
            _ascii_word_features(oov_words, lexicon, features)
    _shape_features(raw, variant, delete, features)
    return features


def _variant(raw: bytes) -> Variant:
    """Class table for a non-ASCII text: (E1 block is Vietnamese Latin, D6 is Hebrew)."""
    vietnamese = False
    if b"\xe1" in raw:
        latin = sum(raw.count(bytes((0xE1, second))) for second in (0xB8, 0xB9, 0xBA, 0xBB))
        vietnamese = 2 * latin >= raw.count(b"\xe1")
    return vietnamese, b"\xd7" in raw


def _word_features(
    oov_words: list[bytes],
    lexicon: Collection[bytes],
    variant: Variant,
    delete: bytes,
    features: list[float],
) -> None:
    """Features of the out-of-lexicon words of a non-ASCII text."""
    oov = b" ".join(oov_words)
    digits = oov.translate(LETTER_TABLES[variant], delete)
    ones = low_bits(len(digits))
    planes = int(digits, 32)
    if (planes >> 3) & (planes << 4) & ones:
        # a lower-case letter followed by an upper-case one: BPE keeps most parts of
        # camelCase identifiers whole, so look the parts up too
        oov_words = _split_identifiers(oov_words, lexicon, features, ascii_only=False)
        if not oov_words:
            return
        oov = b" ".join(oov_words)
        digits = oov.translate(LETTER_TABLES[variant], delete)
        ones = low_bits(len(digits))
        planes = int(digits, 32)
    features[_WORDS + 1] = len(oov_words)
    latin = planes & ones
    if latin:
        upper = (planes >> 1) & ones
        starts = latin & ((latin >> 5) ^ ones)  # a Latin letter after a non-Latin character
        pairs = latin & (latin << 5)
        quads = pairs & (pairs << 10)
        octets = quads & (quads << 20)
        features[_LATIN] = latin.bit_count()
        features[_LATIN + 1] = upper.bit_count()
        features[_LATIN + 2] = ((planes >> 2) & ones).bit_count()
        features[_LATIN + 3] = ((planes >> 4) & ones).bit_count()
        features[_LATIN + 4] = (starts & quads).bit_count()
        features[_LATIN + 5] = (starts & octets).bit_count()
        features[_LATIN + 6] = (starts & octets & (quads << 40)).bit_count()
    if delete:
        _script_features(oov, variant, features)


def _ascii_word_features(
    oov_words: list[bytes], lexicon: Collection[bytes], features: list[float]
) -> None:
    """:func:`_word_features` for ASCII text: every word is one run of Latin letters."""
    case = b" ".join(oov_words).translate(CASE_TABLE)
    if b"aA" in case:
        oov_words = _split_identifiers(oov_words, lexicon, features, ascii_only=True)
        if not oov_words:
            return
        case = b" ".join(oov_words).translate(CASE_TABLE)
    lengths = sorted(map(len, oov_words))
    count = len(lengths)
    features[_WORDS + 1] = count
    features[_LATIN] = sum(lengths)
    features[_LATIN + 1] = case.count(b"A")
    features[_LATIN + 4] = count - bisect_left(lengths, 4)
    features[_LATIN + 5] = count - bisect_left(lengths, 8)
    features[_LATIN + 6] = count - bisect_left(lengths, 12)


def _split_identifiers(
    oov_words: list[bytes], lexicon: Collection[bytes], features: list[float], *, ascii_only: bool
) -> list[bytes]:
    """Replace mixed-case ASCII words by their parts that the lexicon lacks.

    Parts split where a lower-case letter meets an upper-case one, as BPE pre-tokenization
    does (``breadthFirstSearch`` -> ``breadth``, ``First``, ``Search``).
    """
    ascii_words = oov_words if ascii_only else list(filter(bytes.isascii, oov_words))
    cased = list(filterfalse(bytes.islower, ascii_words))
    if not cased:
        return oov_words
    plain = list(filter(bytes.islower, ascii_words))
    if not ascii_only:
        plain += filterfalse(bytes.isascii, oov_words)
    parts = IDENTIFIER_PART.findall(b" ".join(cased))
    unknown_parts = list(filterfalse(lexicon.__contains__, parts))
    features[_WORDS] += len(parts) - len(unknown_parts)
    features[_WORDS + 2] = len(parts) - len(cased)
    return plain + unknown_parts


def _script_features(oov: bytes, variant: Variant, features: list[float]) -> None:
    """Non-Latin letters and symbols of out-of-lexicon words, by script."""
    classes = oov.translate(CLASS_TABLES[variant], CONTINUATION_BYTES)
    runs = classes.translate(RUN_TABLE)
    # visit only the classes present: take one, count it, delete it, repeat
    others = classes.translate(None, b" aAeEv")
    while others:
        code = others[:1]
        chars = others.count(code)
        others = others.translate(None, code) if chars < len(others) else b""
        script = SCRIPT_OF_CLASS.get(code)
        if script is not None:
            _add_script(features, script, chars, runs, code.upper(), 1.0)
            if code == b"c":  # letters beyond the basic (Russian) block: other languages
                marks = oov.translate(CYRILLIC_TABLE)
                features[_CYRILLIC_EXTENDED] = (
                    marks.count(b"12") + marks.count(b"34") + marks.count(b"5")
                )
        elif code in _SYMBOL_INDEX:
            features[_SYMBOL_INDEX[code]] = chars
        elif code in b"kz":
            others = others.translate(None, b"kz")
            cjk = classes.count(b"k") + classes.count(b"z")
            marks = oov.translate(KANA_TABLE)
            kana = marks.count(b"Ek")
            cjk_punct = marks.count(b"Ep")
            features[_CJK] = cjk - kana - cjk_punct
            features[_CJK + 1] = kana
            features[_CJK + 2] = runs.count(b" K") + runs.startswith(b"K")
            features[_SYMBOLS + 2] = cjk_punct
        else:  # a lead byte shared by several scripts: split chars and runs by share
            lead, scripts = SHARED_LEADS[code]
            remaining = chars
            for script, second_bytes in scripts:
                part = sum(oov.count(bytes((lead, second))) for second in second_bytes)
                if part:
                    remaining -= part
                    _add_script(features, script, part, runs, code.upper(), part / chars)
            if remaining > 0:
                _add_script(features, "other", remaining, runs, code.upper(), remaining / chars)


def _add_script(
    features: list[float], script: str, chars: int, runs: bytes, run: bytes, share: float
) -> None:
    """Add a script's chars and ``share`` of the runs of letter ``run`` in ``runs``."""
    index = _SCRIPT_INDEX[script]
    features[index] += chars
    features[index + 1] += (runs.count(b" " + run) + runs.startswith(run)) * share


def _shape_features(raw: bytes, variant: Variant, delete: bytes, features: list[float]) -> None:
    """Digits, punctuation and whitespace of the whole text, from its bit planes.

    ``planes >> (5 + b)`` holds bit ``b`` of each character's predecessor, ``planes << (5 - b)``
    of its successor. A punctuation run is one pre-token, but BPE often merges it with the
    letter after it (``.values``, ``(not``) or with the newlines after it (``);\\n``), so
    runs are told apart by what follows them. BPE cuts a run of ``n`` digits into
    ``ceil(n / 3)`` groups: one per run, plus one per run reaching 4, 7 and 10 digits.
    """
    shape = raw.translate(SHAPE_TABLES[variant], delete)
    planes = int(shape, 32)
    ones = low_bits(len(shape))
    newlines = b"4" in shape
    before_newline = 0
    punct = (planes >> 1) & ones
    if punct:
        runs = punct.bit_count() - (punct & (planes >> 6)).bit_count()
        before_letter = (punct & (planes << 5)).bit_count()
        if newlines:
            before_newline = (punct & (planes << 3)).bit_count()
        features[_PUNCT] = before_letter
        features[_PUNCT + 1] = before_newline
        features[_PUNCT + 2] = runs - before_letter - before_newline
    if newlines:
        newline = (planes >> 2) & ones
        count = newline.bit_count()
        features[_SPACES + 1] = count - (newline & (planes >> 7)).bit_count() - before_newline
        features[_SPACES + 2] = count
    if b"8" in shape:
        digit = (planes >> 3) & ones
        starts = digit ^ (digit & (planes >> 8))  # a digit after a non-digit
        fours = digit & (planes << 2) & (planes << 7) & (planes << 12)  # 4 digits from here
        sevens = fours & (fours << 15)
        features[_DIGITS] = starts.bit_count()
        features[_DIGITS + 1] = (starts & fours).bit_count() + (starts & sevens).bit_count()
        features[_DIGITS + 2] = (starts & sevens & (fours << 30)).bit_count()
    pairs = (planes >> 4) & (planes << 1) & ones  # a blank followed by a blank
    if pairs:  # (cheaper than searching the text for two blanks)
        features[_SPACES] = pairs.bit_count() - (pairs & (planes >> 9)).bit_count()
        if b"\t" in raw:
            features[_SPACES + 3] = raw.count(b"\t")
