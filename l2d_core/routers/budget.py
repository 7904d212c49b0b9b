"""Budgets instead of α/β (SPEC §5): a target share of expert calls, or a mean GFLOPs per query.

A budget is a price the router puts on calling an expert, moved so that what is spent lands on
the target — the plug-in rule then stays a plain argmin over what the page shows:

- **share**: each expert's expected cost carries a surcharge τ (a plug-in router defers when the
  main agent's expected cost exceeds the best expert's by more than τ; a two-stage cascade asks
  its cheapest expert when its doubt in the main answer exceeds τ);
- **gflops**: compute is priced at λ errors per TFLOP (β_j = λ · extra GFLOPs_j / 1000, the
  per-TFLOP price rule), α as set.

The starting τ or λ is calibrated on the training articles, scored by the same head that routes.
Test articles are not distributed like training articles (other topics, other question mixes),
so a fixed threshold drifts (P3's cascade at 30%: 36% on test). The budget is therefore *followed*
as queries arrive: after each query the surcharge moves by a small step towards the target (an
integral controller, :class:`Follower`), which needs no label — only the decisions already made —
so the realised share or spend lands on the target over any stream of a few hundred queries, on
the test articles as in deployment. Every figure is reported beside the target with a bootstrap
interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..method.costs import CostConfig
from ..method.policies import expected_costs
from .decision import Stage

__all__ = [
    "BUDGET_KINDS",
    "BudgetError",
    "Follower",
    "check_budget",
    "defer_margin",
    "calibrate_threshold",
    "price_values",
    "calibrate_price",
    "PriceFollower",
    "PriceGrid",
    "budget_stage",
    "surcharge_choice",
    "price_choice",
    "reach_note",
    "PRICE_CEILING",
    "pinned_note",
    "follower_from_state",
]

BUDGET_KINDS = ("share", "gflops")  # share of queries on which an expert is called; mean GFLOPs per query
SHARE_STEP = 0.01  # the surcharge's step per query, as a fraction of the spread of the calibration scores
PRICE_STEP = 0.15  # the log-price's step per query, per unit of relative overspend
PRICE_RANGE = (1e-4, 1e4)  # λ (errors per TFLOP) the GFLOPs follower moves within
# what spends the most a price follower can: its cheapest price (reach_note's ``ceiling``)
PRICE_CEILING = f"compute nearly free, λ = {PRICE_RANGE[0]:g}: more is not expected to help"


class BudgetError(ValueError):
    """A budget that is not a budget (a share outside [0, 1], a negative or NaN spend)."""


def check_budget(kind: str, target: float) -> float:
    """The target as a float, or a one-line :class:`BudgetError`.

    >>> check_budget("share", 0.3)
    0.3
    >>> check_budget("share", 7)
    Traceback (most recent call last):
    ...
    l2d_core.routers.budget.BudgetError: a share of expert calls is between 0 and 1, got 7
    """
    if kind not in BUDGET_KINDS:
        raise BudgetError(f"budget kind must be one of {BUDGET_KINDS}, got {kind!r}")
    try:
        t = float(target)
    except (TypeError, ValueError):
        raise BudgetError(f"a budget is a number, got {target!r}") from None
    if not math.isfinite(t):
        raise BudgetError(f"a budget is a finite number, got {target!r}")
    if kind == "share" and not 0.0 <= t <= 1.0:
        raise BudgetError(f"a share of expert calls is between 0 and 1, got {target:g}")
    if kind == "gflops" and t <= 0:
        raise BudgetError(f"a GFLOPs budget is a number of GFLOPs per query > 0, got {target:g}")
    return t


def defer_margin(p_err: np.ndarray, costs: CostConfig) -> tuple[np.ndarray, np.ndarray]:
    """(margin (N,), best expert (N,)): how much cheaper in expected cost the best expert is than
    the main agent (positive: the plain rule defers), and which expert that is.

    >>> p = np.array([[[0.9, 0.1], [0.9, 0.1]], [[0.1, 0.1], [0.1, 0.1]]])     # (N=2, 2, A=2)
    >>> m, j = defer_margin(p, CostConfig((1.0,), (0.2,)))
    >>> m.round(2).tolist(), j.tolist()
    ([1.2, -0.4], [1, 1])
    """
    ec = expected_costs(p_err, costs)  # (N, A)
    best = 1 + ec[:, 1:].argmin(axis=1)
    return ec[:, 0] - ec[np.arange(len(ec)), best], best


def calibrate_threshold(margin: np.ndarray, target: float) -> float:
    """τ such that ``margin > τ`` holds on at most ``target`` of these queries (the largest share
    that does not exceed it, ties kept together); ±inf where none / all.

    >>> m = np.array([0.5, -0.2, 0.1, 0.9])
    >>> calibrate_threshold(m, 0.5)                    # the two largest margins defer
    0.3
    >>> calibrate_threshold(m, 0.0), calibrate_threshold(m, 1.0)
    (inf, -inf)
    """
    m = np.sort(np.asarray(margin, dtype=float))[::-1]
    n = len(m)
    k = int(np.floor(min(max(target, 0.0), 1.0) * n + 1e-9))
    while 0 < k < n and m[k - 1] == m[k]:  # ties go together: never exceed the target
        k -= 1
    if k == 0:
        return float(np.inf)
    if k == n:
        return float(-np.inf)
    return float((m[k - 1] + m[k]) / 2)


@dataclass
class Follower:
    """An online threshold: query t is *over* when ``score_t > threshold``; after each query the
    threshold moves by ``step · (over_t − target)`` within ``[lo, hi]``, so that the share of
    queries over it follows ``target`` whatever the scores' distribution (only past decisions
    are read). With ``spend_if_over`` / ``spend_if_not`` (N,) the target is a mean spend
    instead, and the step is ``step · (spent_t − target) / target``.

    >>> scores = np.random.default_rng(0).normal(0.3, 1.0, 2000)   # shifted from N(0, 1) ...
    >>> round(float((scores > 0.674).mean()), 3)       # ... where 0.674 put 25% over: a fixed one drifts
    0.338
    >>> f = Follower(threshold=0.674, target=0.25, step=0.05, lo=-5.0, hi=5.0)
    >>> over, used = f.decide(scores)
    >>> round(float(over.mean()), 3), round(float(f.threshold), 2)
    (0.253, 0.92)
    """

    threshold: float
    target: float
    step: float
    lo: float
    hi: float
    spend: bool = False  # the target is a mean spend (GFLOPs per query), not a share

    def over(self, score: float) -> bool:
        """Whether one query is over the threshold in force (it does not move until observed)."""
        return score > self.threshold

    def observe(self, over: bool, spent: float | None = None) -> None:
        """Move the threshold after one query: by its share miss, or by its relative overspend."""
        if self.spend and spent is None:
            raise ValueError("a follower of a mean spend needs what each query spent")
        miss = (spent - self.target) / self.target if self.spend else float(over) - self.target
        self.threshold = min(self.hi, max(self.lo, self.threshold + self.step * miss))

    def decide(self, score, spend_if_over=None, spend_if_not=None) -> tuple[np.ndarray, np.ndarray]:
        """``(over (N,), threshold in force for each (N,))``, in order; the state moves on."""
        n = len(score)
        over, used = np.zeros(n, dtype=bool), np.empty(n)
        yes = np.asarray(spend_if_over, float).tolist() if self.spend else None
        no = np.asarray(spend_if_not, float).tolist() if self.spend else None
        for t, s in enumerate(np.asarray(score, dtype=float).tolist()):
            used[t] = self.threshold
            o = over[t] = self.over(s)
            self.observe(o, (yes[t] if o else no[t]) if self.spend else None)
        return over, used

    @classmethod
    def start(
        cls, calibration: np.ndarray, share: float, target: float, bounds: tuple[float, float], spend=False
    ) -> Follower:
        """Starting where ``share`` of the ``calibration`` scores are over, following ``target``
        (a share, or a mean spend with ``spend``), by a step scaled to the scores' spread, within
        finite ``bounds`` that put every / no query over."""
        lo, hi = bounds
        begin = min(hi, max(lo, calibrate_threshold(calibration, share)))
        q = np.quantile(calibration, [0.1, 0.9]) if len(calibration) else np.array([0.0, 1.0])
        spread = float(q[1] - q[0]) or 1.0
        return cls(begin, float(target), SHARE_STEP * spread, lo, hi, bool(spend))


def price_values(errors: np.ndarray, extra_gflops: np.ndarray, price) -> np.ndarray:
    """Expected cost per agent at per-query prices λ (errors per TFLOP): ``errors`` (N, A) the
    α-weighted expected wrong endpoints, plus β = λ · extra GFLOPs / 1000 on both endpoints.

    >>> price_values(np.array([[1.0, 0.2]]), np.array([[0.0, 100.0]]), 2.0).round(2).tolist()
    [[1.0, 0.6]]
    """
    lam = np.broadcast_to(np.asarray(price, dtype=float), (len(errors),))
    return errors + 2.0 * lam[:, None] * extra_gflops / 1000.0


def _mean_spend(errors, extra_gflops, base, lam: float) -> float:
    choice = price_values(errors, extra_gflops, lam).argmin(axis=1)
    return float((base + extra_gflops[np.arange(len(choice)), choice]).mean())


def calibrate_price(errors, extra_gflops, base, target: float) -> tuple[float, float, float]:
    """``(λ, least spend, most spend)``: the price at which the mean spend on these queries
    (``base`` (N,) paid on each, plus the chosen agent's ``extra_gflops``) is closest to
    ``target`` from below — bisection in log λ, spend falls as λ rises — and the range of mean
    spends a price can reach."""
    lo, hi = PRICE_RANGE
    most, least = _mean_spend(errors, extra_gflops, base, lo), _mean_spend(errors, extra_gflops, base, hi)
    if target >= most:
        return lo, least, most
    if target <= least:
        return hi, least, most
    a, b = math.log(lo), math.log(hi)
    for _ in range(40):
        mid = (a + b) / 2
        a, b = (a, mid) if _mean_spend(errors, extra_gflops, base, math.exp(mid)) <= target else (mid, b)
    return math.exp(b), least, most


@dataclass
class PriceFollower:
    """The GFLOPs follower: compute priced at λ errors per TFLOP (``log_price``: log λ); after
    each query log λ moves by ``step`` × the relative overspend, within ``[lo, hi]`` (logs of
    :data:`PRICE_RANGE`), so that the mean spend follows ``target`` GFLOPs per query."""

    log_price: float
    target: float
    step: float = PRICE_STEP
    lo: float = math.log(PRICE_RANGE[0])
    hi: float = math.log(PRICE_RANGE[1])

    @property
    def price(self) -> float:
        return math.exp(self.log_price)

    def observe(self, spent: float) -> None:
        u = self.log_price + self.step * (spent - self.target) / self.target
        self.log_price = min(self.hi, max(self.lo, u))

    def decide(self, errors, extra_gflops, base) -> tuple[np.ndarray, np.ndarray]:
        """``(choice (N,), λ in force (N,))`` over a stream: ``errors`` (N, A) α-weighted expected
        wrong endpoints, ``extra_gflops`` (N, A) what each agent adds over the main agent,
        ``base`` (N,) what every query pays; the state moves on."""
        n = len(errors)
        choice, used = np.empty(n, dtype=int), np.empty(n)
        base = np.broadcast_to(np.asarray(base, dtype=float), (n,))
        for t in range(n):
            used[t] = lam = self.price
            j = choice[t] = int(np.argmin(errors[t] + 2.0 * lam * extra_gflops[t] / 1000.0))
            self.observe(float(base[t] + extra_gflops[t, j]))
        return choice, used


@dataclass(frozen=True)
class PriceGrid:
    """Prices λ (errors per TFLOP) log-spaced over :data:`PRICE_RANGE`, for a router whose decision
    at one price takes a fit (a two-stage cascade's threshold): it decides at every grid price
    once, and follows a GFLOPs budget at the grid price nearest its :class:`PriceFollower`'s.

    >>> grid = PriceGrid(9)   # one price a decade
    >>> grid.prices[[0, 4, 8]].tolist(), grid.index(math.log(0.8)), grid.index(math.log(5e4))
    ([0.0001, 1.0, 10000.0], 4, 8)
    >>> spend = np.array([[9.0, 9.0], [6.0, 4.0], [3.0, 1.0]] + [[1.0, 1.0]] * 6)  # falls as λ rises
    >>> grid.start(spend, 5.0)   # the cheapest price spending at most 5, and the reachable range
    (1, 1.0, 9.0)
    """

    n: int = 65
    lo: float = PRICE_RANGE[0]
    hi: float = PRICE_RANGE[1]

    @property
    def prices(self) -> np.ndarray:
        return np.geomspace(self.lo, self.hi, self.n)

    def index(self, log_price: float) -> int:
        lo, hi = math.log(self.lo), math.log(self.hi)
        return int(np.clip(round((log_price - lo) / (hi - lo) * (self.n - 1)), 0, self.n - 1))

    def start(self, spend: np.ndarray, target: float) -> tuple[int, float, float]:
        """``(index, least, most)`` from ``spend`` (n, N), each grid price's spend on calibration
        queries: the cheapest price whose mean spend is at most ``target`` (the dearest where none
        is), and the range of mean spends the prices reach."""
        mean = spend.mean(axis=1)
        under = np.flatnonzero(mean <= target + 1e-9)
        return (int(under[0]) if len(under) else self.n - 1), float(mean.min()), float(mean.max())

    def saved(self, thresholds: np.ndarray, settings: list[CostConfig]) -> dict:
        """What a frozen router keeps of the grid (read back by :meth:`in_force`): each price's
        doubt threshold and experts' β, and the range of the prices."""
        beta = [list(c.beta) for c in settings]
        return {"threshold": np.asarray(thresholds).tolist(), "beta": beta, "range": [self.lo, self.hi]}

    @staticmethod
    def in_force(config: dict, follower) -> tuple[float, CostConfig | None]:
        """A frozen router's doubt threshold and cost setting for its next query: a threshold
        follower's threshold and the saved costs (None); under a price follower, the threshold and
        costs saved in ``config["price_grid"]`` at the grid price nearest the price in force (on
        the saved grid's range; one saved without it was on :data:`PRICE_RANGE`)."""
        if not isinstance(follower, PriceFollower):
            return follower.threshold, None
        grid = config["price_grid"]
        g = PriceGrid(len(grid["threshold"]), *grid.get("range", PRICE_RANGE)).index(follower.log_price)
        return grid["threshold"][g], CostConfig(tuple(config["costs"]["alpha"]), tuple(grid["beta"][g]))

    def follow(self, follower: PriceFollower, spend: np.ndarray) -> np.ndarray:
        """The grid index in force for each query of a stream (``spend`` (n, N): what each would
        spend at each grid price), the follower moving on after each."""
        used = np.empty(spend.shape[1], dtype=int)
        for t in range(len(used)):
            g = used[t] = self.index(follower.log_price)
            follower.observe(float(spend[g, t]))
        return used


def pinned_note(target: float, spent: float, price: np.ndarray) -> str:
    """Why a followed GFLOPs budget was not met on a stream when the price sat at an end of its
    range (nearly free compute and still under the budget; or the dearest price and still over
    it), or "" when it was met or the price could move.

    >>> pinned_note(800.0, 450.0, np.full(10, PRICE_RANGE[0]))[:48]
    'it spends 450.0 GFLOPs per query on these questi'
    """
    lo, hi = PRICE_RANGE
    if abs(spent - target) <= 0.05 * target:
        return ""
    if spent < target and (price <= lo * 1.001).mean() > 0.1:
        return (
            f"it spends {spent:.1f} GFLOPs per query on these questions: more compute is not expected to "
            f"help them (compute was nearly free, λ = {lo:g}, on {(price <= lo * 1.001).mean():.0%} of them)"
        )
    if spent > target and (price >= hi * 0.999).mean() > 0.1:
        return f"it cannot spend less than {spent:.1f} GFLOPs per query on these questions"
    return ""


def budget_stage(kind: str, target: float) -> Stage:
    """How a decision under a budget is named where it is explained."""
    if kind == "share":
        note = f"calling an expert carries a surcharge that keeps the share of expert calls at {target:.0%}"
        return Stage("", "expected cost + budget surcharge", note)
    note = f"compute is priced at the λ (errors per TFLOP) that keeps the mean at {target:g} GFLOPs per query"
    return Stage("", "expected cost at the budget's price", note)


def surcharge_choice(p_err: np.ndarray, costs: CostConfig, follower: Follower):
    """A share budget on plug-in estimates over a stream: ``(choice (N,), values (N, A),
    surcharge (N,))`` — each expert's expected cost plus the surcharge in force, the least
    chosen; ``follower`` (on the defer margin) moves on."""
    margin, best = defer_margin(p_err, costs)
    over, surcharge = follower.decide(margin)
    expert = np.arange(p_err.shape[2]) > 0
    values = expected_costs(p_err, costs) + surcharge[:, None] * expert
    return np.where(over, best, 0), values, surcharge


def price_choice(p_err: np.ndarray, alpha, follower: PriceFollower, extra_gflops, base):
    """A GFLOPs budget on plug-in estimates over a stream: ``(choice (N,), values (N, A), λ (N,))``
    — each agent's α-weighted expected mistakes plus its extra compute at the price in force;
    ``follower`` moves on. ``extra_gflops`` (N, A): what each agent adds over the main agent;
    ``base`` (N,): what every query pays."""
    errors = expected_costs(p_err, CostConfig(tuple(alpha), (0.0,) * len(alpha)))
    choice, price = follower.decide(errors, extra_gflops, base)
    return choice, price_values(errors, extra_gflops, price), price


def reach_note(
    kind: str, target: float, least: float, most: float, ceiling: str = "an expert on every query"
) -> str:
    """Why a GFLOPs target cannot be met, or "" when it can; ``ceiling``: what spends ``most``.

    >>> reach_note("gflops", 2.0, 5.0, 100.0)
    'it cannot spend less than 5.0 GFLOPs per query (what runs on every query): the budget of 2 is not met'
    >>> reach_note("gflops", 200.0, 5.0, 100.0)
    'it spends at most 100.0 GFLOPs per query (an expert on every query), below the budget of 200'
    """
    if kind != "gflops" or least - 1e-9 <= target <= most + 1e-9:
        return ""
    if target < least:
        return (
            f"it cannot spend less than {least:.1f} GFLOPs per query (what runs on every query): the "
            f"budget of {target:g} is not met"
        )
    return f"it spends at most {most:.1f} GFLOPs per query ({ceiling}), below the budget of {target:g}"


def follower_from_state(state: dict | None):
    """A budget's follower from its saved state (None: no budget): a price (``log_price``) or a
    threshold on a score."""
    if not state:
        return None
    cls = PriceFollower if "log_price" in state else Follower
    try:
        return cls(**state)
    except TypeError:
        raise ValueError(f"a budget follower's state has unknown fields: {sorted(state)}") from None
