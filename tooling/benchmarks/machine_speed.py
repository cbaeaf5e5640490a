"""How fast this machine runs plain Python now, printed beside a load benchmark's figures.

The same benchmark on the same code spreads severalfold between runs on a shared machine
(its cores' speed moves with the other work on the host), and a first token's p99 at high
load follows the machine's speed more than the platform's. A fixed workload timed just
before the run tells two runs' machines apart: figures are comparable only between runs
whose reference times are close."""

from __future__ import annotations

import time

#: The fixed workload: the sum of the squares of the first ``REFERENCE_N`` integers.
REFERENCE_N = 1_000_000


def reference_loop_ms(repeats: int = 3) -> float:
    """The best of ``repeats`` timings of the fixed workload, in milliseconds."""
    best = float("inf")
    for _ in range(max(1, repeats)):
        started = time.perf_counter()
        sum(i * i for i in range(REFERENCE_N))
        best = min(best, time.perf_counter() - started)
    return round(best * 1000, 1)
