"""The two-stage cascade: its threshold rule against brute force, and the router on a small real
P3 slice — what it pays, what the second stage learns from the asked expert's answer, and its
place in the validation ranking."""

from __future__ import annotations

import numpy as np
import pytest
from _slices import slice_bench
from sklearn.metrics import roc_auc_score

from l2d_core.app_logic.decisions import decisions_frame
from l2d_core.app_logic.explorer import router_view
from l2d_core.evaluation.budget_results import budget_decision
from l2d_core.evaluation.points import router_points
from l2d_core.evaluation.validation import rank_by_validation
from l2d_core.method.costs import CostConfig
from l2d_core.routers.registry import make_router
from l2d_core.routers.staged import ask_threshold, staged_choice, staged_query_costs


def _total(th, score, errors, p2, costs):
    ask, final = staged_choice(score, th, p2, costs)
    return staged_query_costs(errors, costs, ask, final).sum()


@pytest.mark.parametrize("trial", range(20))
def test_ask_threshold_is_the_best_threshold_by_brute_force(trial):
    rng = np.random.default_rng(trial)
    n = 40
    errors = rng.random((n, 2, 3)) < [0.5, 0.25, 0.15]
    p2 = np.clip(errors + rng.normal(0, 0.6, errors.shape), 0, 1)  # noisy second-stage estimates
    score = np.round(rng.random(n), 1)  # ties on purpose
    costs = CostConfig((1.0, 1.0), tuple(rng.uniform(0, 0.4, 2)))
    args = (score, errors, p2, costs)
    best = min(_total(c, *args) for c in [np.inf, -np.inf, *np.unique(score)])
    assert _total(ask_threshold(*args), *args) == pytest.approx(best)


def test_ask_threshold_refuses_no_questions():
    with pytest.raises(ValueError, match="labelled questions"):
        ask_threshold(np.zeros(0), np.zeros((0, 2, 2), bool), np.zeros((0, 2, 2)), CostConfig((1.0,), (0.1,)))


@pytest.fixture(scope="module")
def p3(real_data):
    return slice_bench("P3", n_train=8, n_test=2)


@pytest.fixture(scope="module")
def staged(p3):
    return make_router("l2d-staged").fit(p3)


def test_the_second_stage_learns_from_the_asked_experts_answer(p3, staged):
    """Where match-lstm and rnet-plus agree, match-lstm is mostly right: the estimate that has seen
    rnet-plus's answer tells a wrong main answer apart better than the first stage's."""
    wrong = p3.test.em[:, 0] == 0
    first = roc_auc_score(wrong, staged.first_.p_err_[:, :, 0].sum(1))
    second = roc_auc_score(wrong, staged.second_.p_err_[:, :, 0].sum(1))
    assert p3.test.agent_ids[staged.asked_] == "rnet-plus"
    assert second > first + 0.05 and second > 0.8


def test_what_the_two_stage_cascade_pays(p3, staged):
    g = dict(zip(p3.test.agent_ids, p3.test.agent_gflops))
    seen = set()
    for lam in (0.0, 0.2, 1.6, 2.0, 100.0):
        costs = p3.price_costs(lam)
        d = staged.decide(costs)
        ask = d.per_query["share"] > 0
        final = d.choice
        # main always; rnet-plus where asked (or kept); bert-ens where kept
        want = g["match-lstm"] + g["rnet-plus"] * (ask | (final == 1)) + g["bert-ens"] * (final == 2)
        np.testing.assert_allclose(d.per_query["gflops"], want)
        assert not (final[~ask] != 0).any()  # nobody leaves the main agent without asking first
        np.testing.assert_allclose(d.per_query["tdl"], staged_query_costs(p3.test.errors, costs, ask, final))
        point = router_points(staged, betas=(), prices=(lam,))[-1]
        assert point["gflops"] == pytest.approx(want.mean())
        assert point["asked_share"] == pytest.approx(ask.mean())
        seen.add(round(float(ask.mean()), 3))
    assert staged.decide(p3.price_costs(100.0)).per_query["share"].sum() == 0  # too dear to ask anyone
    assert len(seen) >= 3  # the price moves the share asked


def test_the_two_stage_cascade_is_ranked_on_validation(p3, staged):
    ranking = rank_by_validation(p3, ["l2d-cascade", "l2d-staged"])
    assert {r.router_id for r in ranking} == {"l2d-cascade", "l2d-staged"}
    assert all(np.isfinite([r.gain, r.price, r.aiq]).all() for r in ranking)
    g, em = staged.oof_outcome(p3.costs(0.05))
    assert g.shape == em.shape == (len(p3.train),) and (g >= p3.train.agent_gflops[0]).all()


def test_the_pages_show_what_it_paid_and_whom_it_asked(p3, staged):
    costs = p3.price_costs(1.6)
    view = router_view(p3, staged, costs)
    d = staged.decide(costs)
    assert view.metrics["gflops_per_query"] == pytest.approx(d.per_query["gflops"].mean())
    assert view.metrics["tdl"] == pytest.approx(d.per_query["tdl"].mean())
    df = decisions_frame(p3, view)
    np.testing.assert_array_equal(df["asked rnet-plus"].to_numpy(), d.per_query["share"] > 0)


def test_a_budget_calibrates_where_the_two_stage_cascade_asks(p3, staged):
    costs = p3.price_costs(0.1)
    d, share = budget_decision(staged, costs, "share", 0.3)
    assert 0.25 < share.training_share <= 0.3  # where it starts: on the training articles
    assert share.test_share == pytest.approx(d.per_query["share"].mean())
    # followed on the test articles: it lands near the target over this slice's few hundred questions
    # (scripts/bench_budgets.py measures the full pools: within ±0.02)
    assert abs(share.test_share - 0.3) <= 0.04
    lo, hi = share.test_share_ci
    assert lo <= share.test_share <= hi
    d, spend = budget_decision(staged, costs, "gflops", 60.0)
    assert abs(spend.test_gflops - 60.0) <= 3.0 and spend.note == ""
    assert spend.test_gflops == pytest.approx(d.per_query["gflops"].mean())
    # a GFLOPs budget prices compute: both stages decide at the price in force, which follows the
    # spend — asking rnet-plus on every question would spend 105 GFLOPs at these costs, and the
    # price lets it call bert-ens where a 1,000-GFLOPs budget allows it
    d, far = budget_decision(staged, costs, "gflops", 1000.0)
    assert far.note == "" and abs(far.test_gflops - 1000.0) <= 50.0 and (d.choice == 2).mean() > 0.4
    assert far.follower["log_price"] == pytest.approx(np.log(far.start)) and far.start < 0.1
    price = d.per_query["price"]
    assert len(np.unique(price)) > 1 and "the price λ in force" in d.stages[0].note
    # each question was decided as the fitted router decides at the grid price in force
    for lam in np.unique(price)[:3]:
        rows = price == lam
        at = staged.decide(p3.price_costs(float(lam)))
        assert (d.choice[rows] == at.choice[rows]).all()
    _, beyond = budget_decision(staged, costs, "gflops", 2000.0)  # more than every agent together
    assert "at most" in beyond.note and "compute nearly free" in beyond.note and beyond.test_gflops < 2000
