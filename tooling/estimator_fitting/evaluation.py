"""Accuracy and speed of a token counter against a reference counter, on a corpus."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from chatplatform.core.tokens.base import TokenCounter

TIMING_REPETITIONS = 5


def evaluate(
    corpus_rows: Sequence[Mapping[str, Any]],
    counter: TokenCounter,
    reference: TokenCounter,
    margin: float,
) -> dict[str, Any]:
    """Compare ``counter`` with ``reference`` on ``corpus_rows`` (``{"lang", "text"}`` rows).

    Returns exactly these fields:

    - ``counter``, ``reference``: the counters' names; ``messages``: rows evaluated;
    - ``mape_percent``: mean over texts of ``|estimate / reference - 1|``, in percent
      (texts whose reference count is 0 are skipped for this and the per-language figures);
    - ``per_lang``: ``{lang: {messages, mape_percent, bias_percent}}`` where bias is
      ``sum(estimates) / sum(references) - 1`` in percent;
    - ``under_margin_percent``: percent of texts with ``estimate * margin < reference``,
      i.e. under-counted by more than the margin (pass 1.0 for an exact counter);
    - ``counter_mb_per_s``, ``reference_mb_per_s``: UTF-8 megabytes (10**6 bytes) per second
      counting every text once, best of a few repetitions, one text per call.
    """
    texts = [str(row["text"]) for row in corpus_rows]
    estimates = [counter.count(text) for text in texts]
    references = [reference.count(text) for text in texts]
    errors: dict[str, list[float]] = defaultdict(list)
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    all_errors: list[float] = []
    under = 0
    for row, estimate, expected in zip(corpus_rows, estimates, references, strict=True):
        lang = str(row.get("lang", "unknown"))
        if estimate * margin < expected:
            under += 1
        if expected <= 0:
            continue
        error = abs(estimate / expected - 1.0)
        errors[lang].append(error)
        all_errors.append(error)
        sums[lang][0] += estimate
        sums[lang][1] += expected
    result: dict[str, Any] = {
        "counter": counter.name,
        "reference": reference.name,
        "messages": len(texts),
        "mape_percent": _percent(all_errors),
        "per_lang": {
            lang: {
                "messages": len(values),
                "mape_percent": _percent(values),
                "bias_percent": round((sums[lang][0] / sums[lang][1] - 1.0) * 100, 2),
            }
            for lang, values in sorted(errors.items())
        },
        "under_margin_percent": round(under / len(texts) * 100, 3) if texts else 0.0,
    }
    result["counter_mb_per_s"], result["reference_mb_per_s"] = _throughputs(
        (counter, reference), texts
    )
    return result


def _percent(errors: Sequence[float]) -> float:
    return round(sum(errors) / len(errors) * 100, 3) if errors else 0.0


def _throughputs(counters: Sequence[TokenCounter], texts: Sequence[str]) -> list[float]:
    """Best-of-N megabytes per second of each counter's ``count`` over ``texts``.

    Repetitions alternate between the counters, in turning order, so that a busy machine
    slows them alike.
    """
    size = sum(len(text.encode("utf-8")) for text in texts)
    best = [float("inf")] * len(counters)
    order = list(enumerate(counters))
    for _ in range(TIMING_REPETITIONS):
        order.reverse()
        for index, counter in order:
            count = counter.count
            started = time.perf_counter()
            for text in texts:
                count(text)
            best[index] = min(best[index], time.perf_counter() - started)
    return [round(size / 1e6 / seconds, 2) if seconds > 0 else 0.0 for seconds in best]
