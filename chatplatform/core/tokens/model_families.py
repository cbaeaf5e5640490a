"""How many more tokens a model family counts than the local estimator, before calibration.

The estimator is fitted to a public encoding, and a model's online calibration learns its
real ratio from the provider's reports; until then (fewer than ``MIN_SAMPLES`` reports) the
budget is scaled by the *prior* ratio of the model's family, so a new profile's first turns do
not overflow a tight window.

The table, from Anthropic's documentation (platform.claude.com, models/haiku-5-5/overview):
Claude Opus 4.7 and later models use a newer tokenizer, "so the same text counts as
approximately 30% more tokens than on Claude Haiku 4.5". Earlier Claude models (3.x, 4, 4.1,
4.5, 4.6) keep the ratio 1. Claude Mythos Preview, whose tokenizer the documentation found
does not state, gets the newer tokenizer's ratio: assuming too many tokens costs a little
room, assuming too few overflows the window. Any other id without a version, and other
providers' models: 1 (their calibration learns the rest).
"""

from __future__ import annotations

import re

NEWER_CLAUDE_TOKENIZER_RATIO = 1.30
#: The first Claude version on the newer tokenizer.
NEWER_TOKENIZER_SINCE = (4, 7)
#: Ids without a version that are given the newer tokenizer's ratio (see above).
NEWER_UNVERSIONED = frozenset({"claude-mythos-preview"})

_VERSION = re.compile(r"^claude-[a-z]+-(\d+)(?:-(\d{1,2}))?(?:-\d{8})?$")
_LEGACY_VERSION = re.compile(r"^claude-(\d+)(?:-(\d{1,2}))?-[a-z]+")  # claude-3-5-sonnet-...


def claude_version(model_id: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a Claude model id, or None when the id names no version."""
    match = _VERSION.match(model_id) or _LEGACY_VERSION.match(model_id)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2) or 0)


def claude_prior_ratio(model_id: str) -> float:
    """The expected ratio of a Claude model's counts to the estimator's, before any report
    (1.0 for an id that is not a Claude model's)."""
    if not model_id.startswith("claude-"):
        return 1.0
    version = claude_version(model_id)
    if version is None:
        return NEWER_CLAUDE_TOKENIZER_RATIO if model_id in NEWER_UNVERSIONED else 1.0
    return NEWER_CLAUDE_TOKENIZER_RATIO if version >= NEWER_TOKENIZER_SINCE else 1.0
