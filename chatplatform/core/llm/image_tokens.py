"""What an image costs in prompt tokens, by each provider's published formula (upper bounds).

A provider's registry entry (:mod:`.providers`) names the formula it bills images by.
"""

from __future__ import annotations

import math


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic: the image is scaled so its long edge is at most 1568 px (and about 1.15
    megapixels), then costs width * height / 750 tokens."""
    scale = min(1.0, 1568 / max(width, height), math.sqrt(1_150_000 / (width * height)))
    return math.ceil(width * scale * height * scale / 750)


def openai_image_tokens(width: int, height: int) -> int:
    """OpenAI-style (high detail): scaled into 2048 px, short side to 768 px, 170 tokens per
    512-px tile plus 85."""
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)
