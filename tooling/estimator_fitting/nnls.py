"""Non-negative least squares (Lawson-Hanson active set), for fitting only (needs numpy)."""

from __future__ import annotations

import numpy as np


def nnls(matrix: np.ndarray, target: np.ndarray, *, tolerance: float = 1e-10) -> np.ndarray:
    """``argmin ||matrix @ x - target||`` subject to ``x >= 0``.

    Lawson & Hanson (1974): grow a set of free (positive) variables by the most useful
    one, solve unconstrained on it, and step back to feasibility when a variable would go
    negative. Terminates when no variable outside the set can lower the residual.
    """
    columns = matrix.shape[1]
    free = np.zeros(columns, dtype=bool)
    solution = np.zeros(columns)
    gradient = matrix.T @ (target - matrix @ solution)
    for _ in range(3 * columns + 10):
        candidates = np.where(free, -np.inf, gradient)
        if free.all() or candidates.max() <= tolerance:
            break
        free[int(np.argmax(candidates))] = True
        while True:
            trial = np.zeros(columns)
            trial[free] = np.linalg.lstsq(matrix[:, free], target, rcond=None)[0]
            if (trial[free] > tolerance).all():
                solution = trial
                break
            # step from the feasible solution toward the trial until a variable hits zero
            blocking = free & (trial <= tolerance)
            step = np.min(solution[blocking] / (solution[blocking] - trial[blocking]))
            solution = solution + step * (trial - solution)
            free &= solution > tolerance
            solution[~free] = 0.0
        gradient = matrix.T @ (target - matrix @ solution)
    return solution
