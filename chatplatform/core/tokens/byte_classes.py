"""UTF-8 byte classes: the ``bytes.translate`` tables that turn a text into class letters
and bit planes for :mod:`chatplatform.core.tokens.features`.

A character is classed by its UTF-8 lead byte (continuation bytes are deleted), by its
second byte where scripts share a lead byte. The tables are built once at import; the
feature extraction only translates, counts and shifts (its module docstring says why).
"""

from __future__ import annotations

import functools
import re

# Byte ranges of UTF-8 lead bytes (and ASCII) by class letter; 0x80-0xBF are continuations.
_CLASS_RANGES = (
    (0x00, 0x7F, "o"),  # ASCII punctuation, symbols, controls (refined below)
    (0x61, 0x7A, "a"),  # a-z
    (0x41, 0x5A, "A"),  # A-Z
    (0x30, 0x39, "d"),  # 0-9
    (0xC2, 0xC2, "s"),  # Latin-1 punctuation and symbols (NBSP, «», °, ©)
    (0xC3, 0xC3, "e"),  # Latin-1 letters (and the rare signs x, /)
    (0xC4, 0xCD, "E"),  # Latin Extended-A/B, IPA, spacing modifiers, combining marks
    (0xCE, 0xCF, "g"),  # Greek
    (0xD0, 0xD3, "c"),  # Cyrillic
    (0xD4, 0xD6, "h"),  # Armenian (and the rare Cyrillic Supplement)
    (0xD7, 0xD7, "w"),  # Hebrew
    (0xD8, 0xDD, "r"),  # Arabic, Syriac, Arabic Supplement
    (0xDE, 0xDF, "x"),  # Thaana, NKo
    (0xE0, 0xE0, "i"),  # U+0800-0FFF: Indic, Thai, Lao, Tibetan (told apart by share)
    (0xE1, 0xE1, "j"),  # U+1000-1FFF: Georgian, Myanmar, Khmer, Greek Extended, ...
    (0xE2, 0xE2, "y"),  # general punctuation, symbols, arrows, box drawing
    (0xE3, 0xE3, "k"),  # CJK punctuation, kana, CJK Extension A (told apart by share)
    (0xE4, 0xE9, "z"),  # CJK unified ideographs
    (0xEA, 0xED, "u"),  # Hangul syllables
    (0xEE, 0xEE, "x"),  # private use
    (0xEF, 0xEF, "f"),  # compatibility, presentation and fullwidth forms
    (0xF0, 0xFF, "q"),  # beyond the BMP: emoji, CJK Extension B, ...
)
_LETTER_CLASSES = "aAeEvcghwrxijkzu"


def _class_table(*, e1_is_latin: bool, d6_is_hebrew: bool) -> bytes:
    """UTF-8 byte -> class letter of the character it starts."""
    table = bytearray(256)
    for low, high, code in _CLASS_RANGES:
        table[low : high + 1] = code.encode() * (high - low + 1)
    for byte, code in ((" ", " "), ("\t", " "), ("\n", "n"), ("\r", "n")):
        table[ord(byte)] = ord(code)
    if e1_is_latin:  # Vietnamese: Latin Extended Additional is U+1E00-1EFF
        table[0xE1] = ord("v")
    if d6_is_hebrew:  # U+0590-05BF are Hebrew points when the text is Hebrew
        table[0xD6] = ord("w")
    return bytes(table)


def _recode(table: bytes, mapping: dict[str, str], default: str) -> bytes:
    """Compose ``table`` with a class -> byte ``mapping`` (unmapped classes -> default)."""
    second = bytearray(default.encode() * 256)
    for classes, target in mapping.items():
        for byte in classes.encode():
            second[byte] = ord(target)
    return bytes(second[byte] for byte in table)


Variant = tuple[bool, bool]
CLASS_TABLES: dict[Variant, bytes] = {
    (e1, d6): _class_table(e1_is_latin=e1, d6_is_hebrew=d6)
    for e1 in (False, True)
    for d6 in (False, True)
}
CONTINUATION_BYTES = bytes(range(0x80, 0xC0))
# bit planes of the whole text, as base-32 digits: 1 letter, 2 punctuation or symbol,
# 4 newline, 8 digit, 16 (g) blank
SHAPE_TABLES = {
    variant: _recode(table, {_LETTER_CLASSES: "1", "osyfq": "2", "n": "4", "d": "8", " ": "g"}, "0")
    for variant, table in CLASS_TABLES.items()
}

# bit planes of out-of-lexicon words: 1 Latin letter, 2 upper case, 4 Latin-1 or Vietnamese
# letter, 8 lower case, 16 Latin Extended or Vietnamese letter
LETTER_TABLES = {
    variant: _recode(table, {"a": "9", "A": "3", "e": "5", "E": "h", "v": "l"}, "0")
    for variant, table in CLASS_TABLES.items()
}
# class -> one run letter per script (other classes separate runs)
RUN_TABLE = _recode(
    bytes(range(256)),
    {"c": "C", "g": "G", "h": "H", "j": "J", "w": "W", "r": "R", "x": "X", "i": "I", "u": "U"}
    | {"kz": "K"},
    " ",
)
# UTF-8 byte -> itself, except ASCII that is not a letter -> space (word separators)
WORD_TABLE = bytes(32 if byte < 128 and not chr(byte).isalpha() else byte for byte in range(256))
# ASCII letters by case (other bytes -> space): camelCase humps and upper-case counts
CASE_TABLE = bytes(
    ord("a") if 97 <= byte <= 122 else ord("A") if 65 <= byte <= 90 else 32 for byte in range(256)
)
# parts of an identifier: BPE splits camelCase where a lower-case letter meets an upper-case one
IDENTIFIER_PART = re.compile(rb"[^a-z ]*[a-z]+|[^a-z ]+")

_MASK_BUCKET = 64  # characters


def low_bits(chars: int) -> int:
    """An integer with bit 0 of each 5-bit digit set, for at least ``chars`` digits.

    Masks come in buckets of 64 characters; a longer mask is harmless because every use
    ands it with planes that have no bits beyond their own characters.
    """
    return _bucket_mask(chars // _MASK_BUCKET + 1)


@functools.lru_cache(maxsize=512)
def _bucket_mask(buckets: int) -> int:
    return int(b"1" * (buckets * _MASK_BUCKET), 32)


SCRIPT_OF_CLASS = {
    b"c": "cyrillic",
    b"g": "greek",
    b"h": "armenian",
    b"w": "hebrew",
    b"r": "arabic",
    b"u": "hangul",
    b"x": "other",
}
# scripts that share a UTF-8 lead byte, told apart by the second byte
SHARED_LEADS = {
    b"i": (
        0xE0,
        (("devanagari", (0xA4, 0xA5)), ("indic", tuple(range(0xA6, 0xB8))), ("thai", (0xB8, 0xB9))),
    ),
    b"j": (0xE1, (("georgian", (0x82, 0x83, 0xB2)), ("greek", (0xBC, 0xBD, 0xBE, 0xBF)))),
}
# Cyrillic outside U+0410-044F (the Russian alphabet but ё): U+0400-040F is D0 80-8F, U+0450-045F
# is D1 90-9F, U+0480-04FF is D2/D3 xx. Lead and continuation bytes get marks so that one
# two-byte count finds each range: "34" (D0 8x), "12" (D1 9x), "5" (D2, D3).
CYRILLIC_TABLE = bytes(
    ord("1")
    if byte == 0xD1
    else ord("3")
    if byte == 0xD0
    else ord("5")
    if byte in (0xD2, 0xD3)
    else ord("2")
    if 0x90 <= byte <= 0x9F
    else ord("4")
    if 0x80 <= byte <= 0x8F
    else ord("0")
    for byte in range(256)
)
PERCENT_ESCAPE = re.compile(rb"%[0-9A-Fa-f]{2}")
# U+3000-30FF by second byte: lead E3 -> "E", 80 (CJK punctuation) -> "p", 81-83 (kana) -> "k",
# so that two counts of byte pairs find them (one 2-byte count costs as much as a translate)
KANA_TABLE = bytes(
    ord("E")
    if byte == 0xE3
    else ord("p")
    if byte == 0x80
    else ord("k")
    if 0x81 <= byte <= 0x83
    else 32
    for byte in range(256)
)
