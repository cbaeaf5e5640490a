"""The training set of the estimator's fit: corpus texts and what supplements them.

The estimator is judged on corpora it never saw, so the training set aims at languages, not
at the training file: the corpus is supplemented with translated UI strings from Django's
locale files (always installed, BSD-licensed; read as files, never imported), which cover
scripts the corpus may lack (Greek, Thai, Indic, Armenian, ...), with short snippets cut
from the corpus texts (chat-sized messages) and with synthetic texts of numbers, codes,
emoji, URLs and long runs built from its words; every language weighs the same, whatever
its number of texts (English must not dominate). Needs numpy (the weights).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import random
import re
import unicodedata
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from chatplatform.core.tokens.bpe import load_encoding

SUPPLEMENT_WEIGHT = 0.25  # per supplement language, against 1.0 per corpus language
SNIPPET_WEIGHT = 0.3  # per corpus language, for its short snippets
SYNTHETIC_WEIGHT = 0.5  # for all synthetic texts together (numbers, codes, emoji, URLs, ...)


@dataclass(frozen=True)
class Sample:
    """One training text: ``kind`` is corpus, supplement or snippet; ``group`` its fold unit."""

    lang: str
    text: str
    group: str
    kind: str


def read_corpus(path: Path | str) -> list[dict[str, Any]]:
    """Rows of a JSONL corpus: objects with at least ``lang`` and ``text``."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            if not isinstance(row.get("text"), str) or not isinstance(row.get("lang"), str):
                raise ValueError(f"{path}:{number}: a row needs string 'lang' and 'text'")
            rows.append(row)
    return rows


def build_lexicon(encoding_name: str) -> frozenset[bytes]:
    """Words the public BPE ``encoding_name`` encodes as one token after a space."""
    words = set()
    for token in load_encoding(encoding_name).token_byte_values():
        if len(token) < 2 or token[:1] != b" ":
            continue
        try:
            word = token[1:].decode("utf-8")
        except UnicodeDecodeError:
            continue
        if all(unicodedata.category(char)[0] in "LM" for char in word):
            words.add(token[1:])
    return frozenset(words)


_PO_STRING = re.compile(r'^msgstr(?:\[\d+\])? ((?:".*"\s*)+)', re.MULTILINE)
_PO_NOISE = re.compile(r"%\([^)]*\)[-+ #0-9.]*[a-z]|%[a-z]|\{[^}]*\}|<[^>]+>|&[a-z]+;")


def django_supplement(seed: int = 0) -> list[dict[str, Any]]:
    """Chat-sized texts in ~100 languages joined from Django's translated UI strings (read
    as files from the installed package, which is not imported)."""
    spec = importlib.util.find_spec("django")
    if spec is None or spec.origin is None:
        return []
    root = Path(spec.origin).resolve().parent
    strings: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.glob("**/locale/*/LC_MESSAGES/django.po")):
        lang = path.parent.parent.name
        if lang.startswith("en"):
            continue
        # the first msgstr of a file is its header (Project-Id-Version, Plural-Forms, ...)
        for match in list(_PO_STRING.finditer(path.read_text(encoding="utf-8")))[1:]:
            parts = re.findall(r'"((?:[^"\\]|\\.)*)"', match.group(1))
            text = _PO_NOISE.sub("", _unescape_po("".join(parts))).strip()
            if len(text) > 1:
                strings[lang].append(text)
    rows = []
    rng = random.Random(seed)
    for lang, texts in sorted(strings.items()):
        chunk: list[str] = []
        target = rng.choice((60, 200, 600, 1500))
        for text in texts:
            chunk.append(text)
            if sum(map(len, chunk)) >= target:
                joiner = rng.choice((" ", "\n", ". "))
                rows.append({"lang": lang, "text": joiner.join(chunk), "source": f"django:{lang}"})
                chunk, target = [], rng.choice((60, 200, 600, 1500))
    return rows


def _unescape_po(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), text)


def short_snippets(
    rows: Sequence[dict[str, Any]], per_text: int, seed: int
) -> list[dict[str, Any]]:
    """Windows of 1-40 words cut from ``rows`` at whitespace, like short chat messages."""
    rng = random.Random(seed)
    snippets = []
    for row in rows:
        words = row["text"].split(" ")
        for _ in range(per_text):
            size = rng.randint(1, min(40, len(words)))
            start = rng.randint(0, len(words) - size)
            text = " ".join(words[start : start + size]).strip()
            if text:
                snippets.append({**row, "text": text})
    return snippets


def synthetic_texts(corpus: Sequence[dict[str, Any]], count: int, seed: int) -> list[str]:
    """Texts rare in prose but common in chats: numbers, codes, emoji, URLs, long runs.

    Words come from the corpus, so the texts stay in its languages.
    """
    rng = random.Random(seed)
    words = [word for row in corpus for word in row["text"].split() if word.isalpha()] or ["word"]
    emoji = [chr(code) for start, end in _EMOJI_RANGES for code in range(start, end)]

    def number() -> str:
        return rng.choice(
            (
                str(rng.randint(0, 10 ** rng.randint(1, 12))),
                f"{rng.uniform(0, 1000):.{rng.randint(1, 4)}f}",
                f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}",
                f"+{rng.randint(1, 99)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}",
            )
        )

    def blob() -> str:
        data = rng.randbytes(rng.randint(4, 200))
        return rng.choice(
            (
                data.hex(),
                base64.b64encode(data).decode(),
                str(uuid.UUID(bytes=data[:16].ljust(16, b"x"))),
            )
        )

    def glyphs() -> str:
        picked = "".join(
            rng.choice(emoji) + rng.choice(("", "", "\ufe0f", "\U0001f3fd"))
            for _ in range(rng.randint(1, 6))
        )
        return picked if rng.random() < 0.5 else f"{rng.choice(words)} {picked}"

    def url() -> str:
        path = "/".join(rng.choice(words).lower() for _ in range(rng.randint(0, 4)))
        query = f"?{rng.choice(words).lower()}={number()}" if rng.random() < 0.5 else ""
        host = f"{rng.choice(words).lower()}.{rng.choice(('com', 'org', 'io', 'ru'))}"
        return f"https://{host}/{path}{query}"

    def run() -> str:
        return rng.choice(("\n", " ", "-", "=", "*", "!", ".", "#", "\t", "ha", "a")) * rng.randint(
            2, 80
        )

    makers = (number, blob, glyphs, url, run, lambda: rng.choice(words))
    texts = []
    for _ in range(count):
        parts = [rng.choice(makers)() for _ in range(rng.randint(1, 60))]
        texts.append(
            "".join(part + rng.choice((" ", " ", ", ", "\n", "")) for part in parts).strip()
        )
    return [text for text in texts if text]


_EMOJI_RANGES = ((0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F680, 0x1F6FF), (0x2600, 0x26FF))


def make_samples(
    corpus: Sequence[dict[str, Any]], *, supplement: bool = True, seed: int = 0
) -> list[Sample]:
    """Corpus texts, their snippets, synthetic texts and (optionally) the Django supplement."""
    samples = [
        Sample(row["lang"], row["text"], f"corpus:{row.get('source', index)}", "corpus")
        for index, row in enumerate(corpus)
    ]
    for index, row in enumerate(short_snippets(corpus, per_text=2, seed=seed)):
        samples.append(
            Sample(row["lang"], row["text"], f"corpus:{row.get('source', index)}", "snippet")
        )
    for index, text in enumerate(synthetic_texts(corpus, count=300, seed=seed)):
        samples.append(Sample("synthetic", text, f"synthetic:{index % 7}", "synthetic"))
    if supplement:
        for index, row in enumerate(django_supplement(seed)):
            samples.append(
                Sample(row["lang"], row["text"], f"{row['source']}:{index % 7}", "supplement")
            )
    return [sample for sample in samples if sample.text]


def sample_weights(samples: Sequence[Sample]) -> np.ndarray:
    """Every (kind, language) gets a fixed total weight, shared by its texts."""
    totals = {
        "corpus": 1.0,
        "snippet": SNIPPET_WEIGHT,
        "supplement": SUPPLEMENT_WEIGHT,
        "synthetic": SYNTHETIC_WEIGHT,
    }
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for sample in samples:
        counts[sample.kind, sample.lang] += 1
    return np.array([totals[s.kind] / counts[s.kind, s.lang] for s in samples])
