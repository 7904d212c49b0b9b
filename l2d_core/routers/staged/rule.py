"""A two-stage cascade (SPEC §5's plug-in rule, applied twice). The main agent answers; where a
first estimate says its answer is likely wrong (``score`` above a threshold), one expert is
*asked* too — the pool's cheapest — and a second estimate, which has seen both answers, picks
the answer by the plug-in rule: the main agent's, the asked expert's, or a dearer expert's. The
asked expert's consultation cost β is paid wherever it was asked, whichever answer is kept.

Arrays: ``errors`` and ``p_err`` are (N, 2, A) as in :mod:`~l2d_core.method.costs`; ``ask``
(N,) bool; ``final`` (N,) the agent whose answer is kept; ``asked`` the asked expert's index.

>>> costs = CostConfig(alpha=[1, 1], beta=[0.05, 0.3])
>>> errors = np.array([[[1, 0, 0], [1, 0, 0]],      # main wrong, asked expert right
...                    [[0, 1, 0], [0, 1, 0]],      # main right
...                    [[1, 1, 0], [1, 1, 0]]], bool)  # only the dear expert is right
>>> staged_query_costs(errors, costs, np.array([True, False, True]), np.array([1, 0, 2])).round(2)
array([0.1, 0. , 0.7])
>>> score = np.array([0.9, 0.1, 0.8])
>>> ask_threshold(score, errors, errors.astype(float), costs)   # ask the two doubtful ones
0.45
"""

from __future__ import annotations

import numpy as np

from ...method.costs import CostConfig, cost_matrix, query_costs
from ...method.policies import expected_costs, plugin_policy

__all__ = [
    "main_doubt",
    "second_stage_choice",
    "staged_choice",
    "staged_values",
    "staged_query_costs",
    "ask_threshold",
    "staged_paid",
]


def _asked_paid(costs: CostConfig, asked: int) -> CostConfig:
    beta = list(costs.beta)
    beta[asked - 1] = 0.0
    return CostConfig(costs.alpha, tuple(beta))


def main_doubt(p_err: np.ndarray) -> np.ndarray:
    """The first stage's doubt in the main answer (N,): its estimated chance of a wrong start plus
    a wrong end.

    >>> main_doubt(np.array([[[0.3, 0.1], [0.2, 0.1]]])).round(2).tolist()
    [0.5]
    """
    return p_err[:, :, 0].sum(axis=1)


def second_stage_choice(p_err: np.ndarray, costs: CostConfig, asked: int = 1) -> np.ndarray:
    """The plug-in choice once expert ``asked`` has answered: its β is already paid (0 here).

    >>> p = np.array([[[0.6, 0.2, 0.1], [0.6, 0.2, 0.1]]])
    >>> second_stage_choice(p, CostConfig(alpha=[1, 1], beta=[0.5, 0.5])).tolist()  # [2] if β₁ were due
    [1]
    """
    return plugin_policy(p_err, _asked_paid(costs, asked))


def staged_choice(
    score: np.ndarray, threshold: float, p_err: np.ndarray, costs: CostConfig, asked: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """``(ask, final)``: ask where ``score > threshold``, then the second stage's choice (from
    ``p_err``, the estimates that have seen the asked expert's answer); elsewhere the main agent."""
    ask = np.asarray(score) > threshold
    return ask, np.where(ask, second_stage_choice(p_err, costs, asked), 0)


def staged_values(
    doubt: np.ndarray, threshold, ask: np.ndarray, p_err: np.ndarray, costs: CostConfig, asked: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """``(values (N, A), stage (N,))``: what decided each question, per agent. Where the expert was
    not asked (stage 0) the first stage compared keeping the main answer — its expected cost, the
    doubt — with the threshold for asking ``asked`` (NaN for the other agents); where it was asked
    (stage 1) the second stage compared every agent's expected cost with the asked expert's price
    already paid. The kept agent is always the least of its row.

    >>> v, stage = staged_values(np.array([0.2, 0.9]), 0.5, np.array([False, True]),
    ...                          np.array([[[0.1, 0.5, 0.1]] * 2, [[0.9, 0.1, 0.2]] * 2]),
    ...                          CostConfig(alpha=[1, 1], beta=[0.05, 0.3]))
    >>> v.round(2).tolist(), stage.tolist()
    ([[0.2, 0.5, nan], [1.8, 0.2, 1.0]], [0, 1])
    """
    ask = np.asarray(ask, dtype=bool)
    n, a = len(ask), p_err.shape[2]
    values = np.full((n, a), np.nan)
    values[:, 0] = doubt
    values[:, asked] = np.broadcast_to(np.asarray(threshold, dtype=float), (n,))
    second = expected_costs(p_err, _asked_paid(costs, asked))
    values[ask] = second[ask]
    return values, ask.astype(int)


def staged_query_costs(
    errors: np.ndarray, costs: CostConfig, ask: np.ndarray, final: np.ndarray, asked: int = 1
) -> np.ndarray:
    """Per-question TDL (N,): the kept answer's Σ_i (α error + β), plus the asked expert's β on
    both endpoints where it was asked and its answer was not kept."""
    qc = query_costs(cost_matrix(errors, costs))
    final = np.asarray(final, dtype=int)
    unused = np.asarray(ask, dtype=bool) & (final != asked)
    return qc[np.arange(len(qc)), final] + 2.0 * costs.beta[asked - 1] * unused


def ask_threshold(
    score: np.ndarray, errors: np.ndarray, p_err: np.ndarray, costs: CostConfig, asked: int = 1
) -> float:
    """The threshold on ``score`` of least total TDL on labelled questions (``errors``), asking
    where ``score`` exceeds it; ``inf`` asks none, ``-inf`` asks all. ``p_err`` are the second
    stage's estimates on the same questions (out of fold, so the choice is not fitted to them)."""
    score = np.asarray(score, dtype=float)
    n = len(score)
    if n == 0:
        raise ValueError("ask_threshold needs labelled questions, got none")
    never = staged_query_costs(errors, costs, np.zeros(n, bool), np.zeros(n, int), asked)
    kept = second_stage_choice(p_err, costs, asked)
    always = staged_query_costs(errors, costs, np.ones(n, bool), kept, asked)
    order = np.argsort(-score, kind="stable")
    total = np.concatenate([[0.0], np.cumsum((always - never)[order])])  # asking the k most doubtful
    s = score[order]
    total[1:-1][s[:-1] == s[1:]] = np.inf  # a threshold cannot split equal scores
    k = int(np.argmin(total))
    if k == 0:
        return float("inf")
    if k == n:
        return float("-inf")
    return float((s[k - 1] + s[k]) / 2)


def staged_paid(gflops: np.ndarray, overhead, ask: np.ndarray, final: np.ndarray, asked: int) -> np.ndarray:
    """GFLOPs per question: what always runs, the asked expert where asked, a dearer one where kept
    (``gflops`` (N, A): what each agent adds to what always runs)."""
    dear = (final != 0) & (final != asked)
    return overhead + ask * gflops[:, asked] + np.where(dear, gflops[np.arange(len(final)), final], 0.0)
