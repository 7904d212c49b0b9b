"""SPEC §5 policies and SPEC §7 metrics on hand-made arrays."""

from __future__ import annotations

import numpy as np
import pytest

from l2d_core.evaluation.metrics import (
    allocation,
    chosen,
    chosen_mean,
    gflops_per_em,
    mean_gflops,
    mean_tdl,
    random_tdl,
    tpr_fpr,
)
from l2d_core.method.costs import CostConfig, cost_matrix, query_costs
from l2d_core.method.policies import (
    bayes_policy,
    expected_costs,
    learned_policy,
    oracle_policy,
    plugin_policy,
    random_policy,
)

PAPER_GFLOPS = np.array([373.66, 32.68, 928.08])  # Llama-3.2-1B, ALBERT-Base, ALBERT-XXL

# ----------------------------------------------------------------------------- learned policy


def test_learned_policy_sums_endpoint_scores():
    scores = np.array(
        [
            [[1.0, 0.0, 0.0], [0.0, 0.0, 2.0]],  # sums (1, 0, 2) -> 2
            # start argmax is 0, end argmax is 1 (tie 1/2), but the sums are (2, 0, 4) -> 2
            [[5.0, 0.0, 4.0], [-3.0, 0.0, 0.0]],
            [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]],  # -> 1
            [[-1.0, -5.0, -9.0], [-1.0, -5.0, -9.0]],  # -> 0
        ]
    )
    assert learned_policy(scores).tolist() == [2, 2, 1, 0]


def test_learned_policy_two_agents_and_shift_invariance():
    scores = np.random.default_rng(0).normal(size=(50, 2, 2))
    expected = (scores[:, 0, 1] + scores[:, 1, 1] > scores[:, 0, 0] + scores[:, 1, 0]).astype(int)
    assert learned_policy(scores).tolist() == expected.tolist()
    # a per-endpoint constant (the softmax's free shift) changes nothing
    shifted = scores + np.array([3.0, -7.0])[None, :, None]
    assert learned_policy(shifted).tolist() == expected.tolist()


# ----------------------------------------------------------------------------- Bayes / plug-in

ETA = np.array(
    [
        [[0.6, 0.2, 0.1], [0.5, 0.3, 0.0]],  # c̄: (0.6, 0.3, 0.25) + (0.5, 0.4, 0.05) = (1.1, 0.7, 0.3)
        [[0.05, 0.0, 0.0], [0.0, 0.0, 0.0]],  # (0.05, 0.1, 0.05) + (0, 0.1, 0.05) = (0.05, 0.2, 0.1)
        [[0.9, 0.1, 0.5], [0.8, 0.0, 0.4]],  # (0.9, 0.2, 1.05) + (0.8, 0.1, 0.85) = (1.7, 0.3, 1.9)
    ]
)
ETA_COSTS = CostConfig(alpha=[1.0, 2.0], beta=[0.1, 0.05])


def test_expected_costs_and_bayes_by_hand():
    np.testing.assert_allclose(
        expected_costs(ETA, ETA_COSTS), [[1.1, 0.7, 0.3], [0.05, 0.2, 0.1], [1.7, 0.3, 1.9]]
    )
    assert bayes_policy(ETA, ETA_COSTS).tolist() == [2, 0, 1]
    # expensive consultation: everything stays on the main model
    assert bayes_policy(ETA, CostConfig(alpha=[1.0, 2.0], beta=[2.0, 2.0])).tolist() == [0, 0, 0]
    # α = 0, β = 0: experts cost nothing; ties between them go to the lowest index
    assert bayes_policy(ETA, CostConfig(alpha=[0.0, 0.0], beta=[0.0, 0.0])).tolist() == [1, 1, 1]


def _plugin_naive(p_hat: np.ndarray, costs: CostConfig) -> list[int]:
    out = []
    for n in range(p_hat.shape[0]):
        totals = []
        for j in range(p_hat.shape[2]):
            total = 0.0
            for i in range(2):
                p = p_hat[n, i, j]
                total += p if j == 0 else costs.alpha[j - 1] * p + costs.beta[j - 1]
            totals.append(total)
        out.append(int(np.argmin(totals)))
    return out


@pytest.mark.parametrize(
    "costs",
    [
        CostConfig(alpha=[1.0, 1.0], beta=[0.05, 0.2]),
        CostConfig(alpha=[0.5, 3.0], beta=[0.3, 0.0]),
        CostConfig(alpha=[1.0, 1.0, 2.0], beta=[0.1, 0.1, 0.01]),
    ],
)
def test_plugin_equals_bayes_rule_with_probabilities(costs):
    rng = np.random.default_rng(costs.n_experts)
    p_hat = rng.uniform(0, 1, size=(200, 2, costs.n_experts + 1))
    got = plugin_policy(p_hat, costs)
    assert got.tolist() == _plugin_naive(p_hat, costs)
    assert got.tolist() == bayes_policy(p_hat, costs).tolist()
    assert len(set(got.tolist())) > 1  # the case is not degenerate


def test_plugin_reacts_to_costs_without_retraining():
    p_hat = ETA
    cheap = plugin_policy(p_hat, CostConfig(alpha=[1.0, 1.0], beta=[0.0, 0.0]))
    dear = plugin_policy(p_hat, CostConfig(alpha=[1.0, 1.0], beta=[5.0, 5.0]))
    assert cheap.tolist() == [2, 1, 1]
    assert dear.tolist() == [0, 0, 0]


# ----------------------------------------------------------------------------- oracle

ORACLE_ERRS = np.array(
    [
        [[0, 0, 0], [0, 0, 0]],  # all right
        [[1, 1, 0], [0, 0, 0]],  # only expert 2 right on both endpoints
        [[1, 0, 0], [1, 0, 0]],  # main wrong, both experts right
        [[1, 1, 1], [1, 1, 1]],  # all wrong
    ],
    dtype=bool,
)


def test_oracle_least_tdl():
    cost = cost_matrix(ORACLE_ERRS, CostConfig(alpha=[1.0, 1.0], beta=[0.1, 0.05]))
    # query TDLs: (0, .2, .1), (1, 1.2, .1), (2, .2, .1), (2, 2.2, 2.1)
    assert oracle_policy(cost, PAPER_GFLOPS).tolist() == [0, 2, 2, 0]


def test_oracle_ties_go_to_cheapest_gflops():
    cost = cost_matrix(ORACLE_ERRS, CostConfig(alpha=[1.0, 1.0], beta=[0.0, 0.0]))
    # TDLs: (0,0,0), (1,1,0), (2,0,0), (2,2,2)
    assert oracle_policy(cost, PAPER_GFLOPS).tolist() == [1, 2, 1, 1]
    assert oracle_policy(cost, np.array([5.0, 900.0, 30.0])).tolist() == [0, 2, 2, 0]
    per_query = np.array([[5.0, 1.0, 9.0], [1.0, 2.0, 3.0], [1.0, 7.0, 6.0], [3.0, 2.0, 1.0]])
    assert oracle_policy(cost, per_query).tolist() == [1, 2, 2, 2]


def test_oracle_tie_survives_float_rounding():
    # 0.1 + 0.2 and 0.3 are not equal in floating point; they are a tie all the same
    cost = np.array([[[1.0, 0.1, 0.3], [1.0, 0.2, 0.0]]])
    assert query_costs(cost)[0, 1] != query_costs(cost)[0, 2]
    assert oracle_policy(cost, np.array([1.0, 50.0, 10.0])).tolist() == [2]


# ----------------------------------------------------------------------------- random policy


def test_random_policy_seeded():
    a = random_policy(1000, 3, seed=7)
    b = random_policy(1000, 3, seed=7)
    c = random_policy(1000, 3, seed=8)
    assert a.tolist() == b.tolist()
    assert a.tolist() != c.tolist()
    assert set(a.tolist()) == {0, 1, 2}
    assert random_policy(0, 3, seed=0).shape == (0,)


def test_random_policy_frequencies():
    n = 60_000
    uniform = np.bincount(random_policy(n, 3, seed=1), minlength=3) / n
    np.testing.assert_allclose(uniform, [1 / 3] * 3, atol=0.01)
    probs = np.array([0.7, 0.2, 0.1])
    weighted = np.bincount(random_policy(n, 3, seed=2, probs=probs), minlength=3) / n
    np.testing.assert_allclose(weighted, probs, atol=0.01)
    # unnormalized probabilities are normalized
    assert (
        random_policy(500, 3, seed=3, probs=[7, 2, 1]).tolist()
        == random_policy(500, 3, seed=3, probs=probs).tolist()
    )
    assert set(random_policy(2000, 3, seed=4, probs=[0.5, 0.0, 0.5]).tolist()) == {0, 2}


def test_random_policy_errors():
    with pytest.raises(ValueError):
        random_policy(-1, 3, seed=0)
    with pytest.raises(ValueError):
        random_policy(10, 0, seed=0)
    with pytest.raises(ValueError):
        random_policy(10, 3, seed=0, probs=[0.5, 0.5])  # wrong length


# ----------------------------------------------------------------------------- metrics

CHOICE = np.array([0, 1, 1, 2, 2])
EM = np.array([[1, 1, 0], [0, 1, 1], [0, 0, 1], [1, 0, 0], [0, 1, 1]], dtype=float)


def test_chosen_and_em():
    assert chosen(EM, CHOICE).tolist() == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert chosen_mean(EM, CHOICE) == pytest.approx(0.6)
    assert chosen_mean(EM, np.zeros(5, dtype=int)) == pytest.approx(0.4)  # main alone
    assert chosen(PAPER_GFLOPS, CHOICE).tolist() == [373.66, 32.68, 32.68, 928.08, 928.08]


def test_allocation():
    np.testing.assert_allclose(allocation(CHOICE, 3), [0.2, 0.4, 0.4])
    np.testing.assert_allclose(allocation(CHOICE, 4), [0.2, 0.4, 0.4, 0.0])
    np.testing.assert_allclose(allocation(np.array([1, 1]), 3), [0.0, 1.0, 0.0])


def test_mean_gflops_includes_rejector():
    # (373.66 + 2·32.68 + 2·928.08) / 5 = 2295.18 / 5 = 459.036
    assert mean_gflops(CHOICE, PAPER_GFLOPS) == pytest.approx(459.036)
    assert mean_gflops(CHOICE, PAPER_GFLOPS, rejector_gflops=0.15) == pytest.approx(459.186)
    per_query = np.arange(15, dtype=float).reshape(5, 3)  # row n: 3n, 3n+1, 3n+2
    # chosen: 0, 4, 7, 11, 14 -> 36 / 5
    assert mean_gflops(CHOICE, per_query, rejector_gflops=1.0) == pytest.approx(36 / 5 + 1.0)


def test_gflops_per_em():
    assert gflops_per_em(459.186, 60.0) == pytest.approx(7.6531)
    assert gflops_per_em(100.0, 0.0) == float("inf")
    assert gflops_per_em(0.15, 100.0) == pytest.approx(0.0015)


def test_tpr_fpr_hand_counts():
    correct = np.array(
        [
            [1, 0, 0],  # main right, kept
            [1, 0, 1],  # main right, sent to wrong expert 1   -> FP
            [1, 0, 1],  # main right, sent to right expert 2   -> neither
            [0, 1, 0],  # main wrong, sent to right expert 1   -> TP
            [0, 1, 0],  # main wrong, sent to wrong expert 2   -> neither
            [0, 1, 1],  # main wrong, kept                     -> neither
            [0, 0, 1],  # main wrong, sent to right expert 2   -> TP
        ],
        dtype=bool,
    )
    choice = np.array([0, 1, 2, 1, 2, 0, 2])
    tpr, fpr = tpr_fpr(choice, correct)
    assert tpr == pytest.approx(2 / 4)
    assert fpr == pytest.approx(1 / 3)
    # no main-wrong queries: TPR undefined
    tpr, fpr = tpr_fpr(np.array([1, 0]), np.array([[1, 0, 1], [1, 1, 1]], dtype=bool))
    assert np.isnan(tpr) and fpr == 0.5


COST = np.array(
    [
        [[1.0, 0.1, 0.8], [0.0, 2.1, 0.8]],  # query costs (1.0, 2.2, 1.6)
        [[0.0, 0.1, 0.3], [1.0, 2.1, 0.3]],  # (1.0, 2.2, 0.6)
    ]
)


def test_mean_tdl():
    assert mean_tdl(COST, np.array([2, 0])) == pytest.approx(1.3)
    assert mean_tdl(COST, np.array([1, 2])) == pytest.approx(1.4)


def test_random_tdl_close_to_expectation():
    rng = np.random.default_rng(0)
    n = 200
    # agent means of the query cost differ a lot: ~2.0, ~1.0, ~0.3
    cost = np.stack(
        [
            rng.uniform(0.5, 1.5, size=(n, 2)),
            rng.uniform(0.0, 1.0, size=(n, 2)),
            rng.uniform(0.0, 0.3, size=(n, 2)),
        ],
        axis=-1,
    )
    qc = query_costs(cost)
    seeds = range(400)
    for probs in (None, np.array([0.8, 0.15, 0.05]), np.array([1.0, 1.0, 2.0])):
        p = np.full(3, 1 / 3) if probs is None else probs / probs.sum()
        exact = float((qc.mean(axis=0) * p).sum())  # Σ_j p_j · mean query cost of j
        mean, std = random_tdl(cost, probs, seeds=seeds)
        assert mean == pytest.approx(exact, abs=0.01)
        # std over seeds ≈ the std of one seed's mean: sqrt(Σ_n Var_J(qc[n, J])) / n
        var_n = (qc**2 * p).sum(axis=1) - ((qc * p).sum(axis=1)) ** 2
        assert std == pytest.approx(np.sqrt(var_n.sum()) / n, rel=0.2)
    assert random_tdl(cost, seeds=[5]) == random_tdl(cost, seeds=[5])
    assert random_tdl(cost, seeds=[5])[1] == 0.0


@pytest.mark.parametrize(
    "fn",
    [
        lambda c: chosen_mean(EM[:0], c),
        lambda c: allocation(c, 3),
        lambda c: mean_tdl(COST[:0], c),
    ],
    ids=["chosen_mean", "allocation", "mean_tdl"],
)
def test_empty_choice_raises(fn):
    with pytest.raises(ValueError):
        fn(np.array([], dtype=int))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_mean_gflops_empty_choice_raises():
    with pytest.raises(ValueError):
        mean_gflops(np.array([], dtype=int), PAPER_GFLOPS, rejector_gflops=0.15)


# ----------------------------------------------------------------------------- router comparison


def test_aiq_of_a_known_hull_by_hand():
    from l2d_core.evaluation.metrics import aiq, upper_hull

    # vertices (1, 40) → (3, 70) → (9, 82); (2, 45) and (6, 74) lie under the chords; (0.5, 30)
    # is left of lo = 1 and shapes nothing (the hull's first vertex is already at 1)
    cost = np.array([1.0, 2.0, 3.0, 6.0, 9.0])
    em = np.array([40.0, 45.0, 70.0, 74.0, 82.0])
    hc, hq = upper_hull(cost, em)
    assert hc.tolist() == [1.0, 3.0, 9.0] and hq.tolist() == [40.0, 70.0, 82.0]
    area = (40 + 70) / 2 * 2 + (70 + 82) / 2 * 6 + 82 * 1  # hull to 9, then flat to hi = 10
    assert aiq(cost, em, 1.0, 10.0) == pytest.approx(area / 9)
    # a dominated point (dearer and worse) changes nothing
    assert aiq(np.r_[cost, 8.0], np.r_[em, 50.0], 1.0, 10.0) == pytest.approx(area / 9)


def test_apgr_of_oracle_random_mixing_and_a_generalised_pool():
    from l2d_core.evaluation.metrics import apgr, cpt, pgr_curve

    weak, strong = 50.0, 90.0
    # random mixing of the two agents: PGR = share, APGR = 1/2, CPT(p) = p
    share = np.linspace(0, 1, 11)
    assert apgr(share, weak + share * (strong - weak), weak, strong) == pytest.approx(0.5)
    assert cpt(share, weak + share * (strong - weak), weak, strong, 0.8) == pytest.approx(0.8)
    # an oracle that recovers the whole gap with 10% of the calls: 1 − 0.1/2
    assert apgr(np.array([0.0, 0.1, 1.0]), np.array([50.0, 90.0, 90.0]), weak, strong) == pytest.approx(0.95)
    # J + 1 agents: share of non-main calls; a point at share 1 below the best agent (a cheap
    # expert alone) is kept, not replaced by the (1, 1) anchor
    s, p = pgr_curve(np.array([0.5, 1.0]), np.array([70.0, 60.0]), weak, strong, grid=3)
    assert s.tolist() == [0.0, 0.5, 1.0] and p.tolist() == [0.0, 0.5, 0.25]
    # two experts alone at share 1 (PGR 0.5 and 1): the better one counts there, even when one
    # share carries rounding noise (a bootstrap mean of ones)
    one = np.array([0.0, 1.0 - 1e-15, 1.0])
    assert apgr(one, np.array([50.0, 90.0, 70.0]), weak, strong) == pytest.approx(0.5)


def test_pareto_front_by_hand():
    from l2d_core.evaluation.metrics import pareto_front

    cost = np.array([5.0, 1.0, 3.0, 3.0, 10.0, 7.0, 1.0])
    em = np.array([80.0, 50.0, 70.0, 75.0, 79.0, 85.0, 40.0])
    # (1, 50) (3, 75) (5, 80) (7, 85); (3, 70) and (1, 40) are beaten at equal cost, (10, 79) dominated
    assert pareto_front(cost, em).tolist() == [1, 3, 0, 5]
    assert pareto_front(np.array([2.0, 2.0]), np.array([1.0, 1.0])).tolist() == [0]  # duplicates: first
    with pytest.raises(ValueError):
        pareto_front(np.ones(2), np.ones(3))


def test_bootstrap_ci_contains_the_estimate_and_shrinks_with_n():
    from l2d_core.evaluation.metrics import bootstrap_ci, bootstrap_weights, resample_means

    rng = np.random.default_rng(0)
    widths = []
    for n in (100, 400, 1600):
        v = (rng.random(n) < 0.7).astype(float)
        lo, hi = bootstrap_ci(v, n_boot=500, seed=1)
        assert lo <= v.mean() <= hi
        widths.append(hi - lo)
        # the textbook normal interval of a proportion, roughly
        assert hi - lo == pytest.approx(2 * 1.96 * np.sqrt(v.mean() * (1 - v.mean()) / n), rel=0.25)
    assert widths[0] > widths[1] > widths[2]  # ~ 1/sqrt(n)
    # paired: a difference of two correlated rows is much tighter than either row
    a = rng.random(500)
    b = a + 0.01 + 0.001 * rng.standard_normal(500)
    w = bootstrap_weights(500, 300, seed=2)
    lo, hi = bootstrap_ci(np.stack([b, a]), lambda m: m[0] - m[1], weights=w)
    assert lo <= float((b - a).mean()) <= hi and hi - lo < 0.001
    assert bootstrap_ci(a, weights=w)[1] - bootstrap_ci(a, weights=w)[0] > 0.02
    # the resample means are plain weighted means, and every resample has n draws
    np.testing.assert_allclose(resample_means(a, w), (w * a).sum(axis=1))
    np.testing.assert_allclose((w * 500).sum(axis=1), 500)
    with pytest.raises(ValueError):
        bootstrap_ci(np.stack([a, b]))  # several rows need a statistic
