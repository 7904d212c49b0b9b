"""The cost explorer's metric tiles: which metrics a router's view shows, how each is written,
which way is better, what it means, and the changes since the previous cost setting."""

from __future__ import annotations

import numpy as np

__all__ = ["TILE_WORDS", "metric_tiles"]

# Metric tiles: label, metric key, value and delta formats, which way is better (None: neither), help.
_TILES = (
    ("EM", "em", "{:.2f}", "{:+.2f}", "higher", "exact match of the answer kept, % of test questions"),
    (
        "EM vs random mixing",
        "gain",
        "{:+.2f}",
        "{:+.2f}",
        "higher",
        "EM minus what sending each question to a single agent at random, in the proportions that "
        "spend the same mean compute (the same mean price where every answer has a price in dollars), "
        "reaches (points; above 0: the router pays for itself)",
    ),
    ("F1", "f1", "{:.2f}", "{:+.2f}", "higher", "word overlap (F1) of the answer kept with gold answers, %"),
    ("GFLOPs/query", "gflops_per_query", "{:.1f}", "{:+.1f}", "lower", "compute paid per question, mean"),
    (
        "Latency/query",
        "latency_s",
        "{:.3f} s",
        "{:+.3f} s",
        "lower",
        "mean seconds per question as the agents' logs record them: the main agent's on every question, "
        "plus the chosen expert's where one was called",
    ),
    (
        "$ per 1,000 questions",
        "usd_per_1k",
        "${:.4g}",
        "{:+.4g}",
        "lower",
        "dollars paid per 1,000 questions at the agents' prices (per answer, or per million tokens read "
        "and written): the main agent's on every question, plus the chosen expert's where one was called",
    ),
    ("GFLOPs/EM", "gflops_per_em", "{:.2f}", "{:+.2f}", "lower", "mean GFLOPs per question ÷ EM (%)"),
    (
        "Answered by an expert",
        "answered_by_expert",
        "{:.1%}",
        "{:+.1%}",
        None,
        "share of questions whose kept answer is an expert's (not the main model's, not an abstention)",
    ),
    (
        "Abstained",
        "abstained",
        "{:.1%}",
        "{:+.1%}",
        None,
        'share of questions answered "no answer" by the agent that abstains (at no cost: no expert ran)',
    ),
    (
        "Expert consulted",
        "consulted",
        "{:.1%}",
        "{:+.1%}",
        None,
        "share of questions on which at least one expert ran and was paid, whichever answer was kept",
    ),
    (
        "TPR",
        "tpr",
        "{:.3f}",
        "{:+.3f}",
        "higher",
        "of the questions the main model gets wrong: share sent to an expert that gets them right",
    ),
    (
        "FPR",
        "fpr",
        "{:.3f}",
        "{:+.3f}",
        "lower",
        "of the questions the main model gets right: share sent to an expert that gets them wrong",
    ),
    (
        "TDL",
        "tdl",
        "{:.4f}",
        "{:+.4f}",
        "lower",
        "true deferral loss: mistakes (per answer end) plus the "
        "price β of each expert call, mean per question",
    ),
    (
        "TDL random",
        "tdl_random",
        "{:.4f}",
        "{:+.4f}",
        None,
        "the same loss when each question goes to an agent drawn uniformly at random (mean of 5 draws)",
    ),
    (
        "TDL random (matched)",
        "tdl_random_matched",
        "{:.4f}",
        "{:+.4f}",
        None,
        "the same loss when questions go to agents at random in this router's proportions (mean of 5 draws)",
    ),
)
# what the tiles mean, in a line under them (the tiles' help holds the same, one each)
TILE_WORDS = (
    "**EM vs random mixing**: EM points above sending each question to a single agent at random in "
    "proportions that cost the same compute (the same money on a pool whose answers have prices). "
    "**Answered by an expert**: the kept answer is an expert's "
    "(an abstention has its own tile where the pool has an agent that abstains); "
    "**expert consulted**: an expert ran and was paid. **TPR**: of the main model's wrong answers, the "
    "share an expert fixed; **FPR**: of its right answers, the share sent to an expert that got them "
    "wrong. **TDL**: mistakes per answer end plus each expert call's price β, per question — lower "
    "is better; *random* rows: the same for random routing."
)


def _fmt(fmt: str, x: float | None) -> str | None:
    if x is None:
        return None
    if not np.isfinite(x):
        return "∞" if x > 0 else ("−∞" if x < 0 else "n/a")
    return fmt.format(x)


def metric_tiles(current: dict, previous: dict | None) -> list[dict]:
    """The metric tiles of one router: label, formatted value, formatted change since the
    previous setting (None without one), which way is better, and help. A tile whose metric the
    view lacks is left out.

    >>> m = {"em": 80.0, "gain": 1.5, "f1": 88.0, "gflops_per_query": 900.0, "gflops_per_em": 11.25,
    ...      "answered_by_expert": 0.5, "consulted": 1.0, "tpr": 0.4, "fpr": float("nan"), "tdl": 0.4,
    ...      "tdl_random": 0.43, "tdl_random_matched": 0.41}
    >>> tiles = metric_tiles(m, dict(m, em=79.5, answered_by_expert=0.25))
    >>> shown = ("EM", "FPR", "Answered by an expert")
    >>> [(t["label"], t["value"], t["delta"]) for t in tiles if t["label"] in shown]
    [('EM', '80.00', '+0.50'), ('Answered by an expert', '50.0%', '+25.0%'), ('FPR', 'n/a', None)]
    >>> metric_tiles(m, None)[0]["delta"] is None
    True
    """
    tiles = []
    for label, key, vfmt, dfmt, better, help_ in _TILES:
        if key not in current:
            continue
        delta = None if previous is None or key not in previous else current[key] - previous[key]
        if delta is not None and not np.isfinite(delta):
            delta = None
        tiles.append(
            {
                "label": label,
                "value": _fmt(vfmt, current[key]),
                "delta": _fmt(dfmt, delta),
                "better": better,
                "help": help_,
            }
        )
    return tiles
