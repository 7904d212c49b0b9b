"""Cascade routing on a small real slice: the main agent's confidence, budgets that land on their
targets, the per-TFLOP price rule, and the validation ranking behind the dashboard's default
router and cost setting."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from _slices import slice_bench

from l2d_core.evaluation import metrics as M
from l2d_core.evaluation.budget_results import budget_decision
from l2d_core.evaluation.comparison import ComparisonPlan, evaluate_router, run_comparison
from l2d_core.evaluation.validation import (
    NO_DEFERRAL_PRICE,
    rank_by_validation,
    validation_curve,
    validation_score,
)
from l2d_core.method.costs import CostConfig
from l2d_core.method.policies import expected_costs
from l2d_core.routers.budget import calibrate_threshold, defer_margin
from l2d_core.routers.features import CONFIDENCE_COLUMNS, confidence_features
from l2d_core.routers.registry import make_router


def _with_confidence(data, rng, informative: bool):
    """The main agent's confidence records: span probability high when it is right (informative)
    or unrelated to it."""
    right = data.correct[:, 0]
    p = np.where(right, 0.85, 0.25) if informative else np.full(len(data), 0.5)
    p = np.clip(p + 0.1 * rng.standard_normal(len(data)), 0.01, 0.99)
    conf = np.full((len(data), data.n_agents), None, dtype=object)
    conf[:, 0] = [{"span_prob": float(x), "margin": float(4 * x), "windows": 1} for x in p]
    return replace(data, confidence=conf)


def _slice(informative: bool):
    b = slice_bench("P2", n_train=8, n_test=2)
    rng = np.random.default_rng(0)
    return replace(
        b, train=_with_confidence(b.train, rng, informative), test=_with_confidence(b.test, rng, informative)
    )


@pytest.fixture(scope="module")
def slices(real_data):
    return {"informative": _slice(True), "uninformative": _slice(False)}


def test_confidence_features_columns_and_missing_records():
    f = confidence_features([{"span_prob": 0.9, "margin": 3.0, "windows": 2}, None, {"abstained": 1.0}])
    assert f.shape == (3, len(CONFIDENCE_COLUMNS)) and f.dtype == np.float32
    col = {c: i for i, c in enumerate(CONFIDENCE_COLUMNS)}
    assert f[0, col["span_prob"]] == pytest.approx(0.9) and f[0, col["log windows"]] == pytest.approx(
        np.log(2)
    )
    assert not f[1].any()  # no record: every signal 0
    assert f[2, col["abstained"]] == 1.0


def test_the_cascade_reads_the_main_agents_confidence(slices):
    """With a confidence that tells right from wrong, the cascade defers the main agent's mistakes;
    with one that does not, it cannot — and it pays only the main agent on every query."""
    apgr = {}
    for name, b in slices.items():
        r = make_router("l2d-cascade").fit(b)
        assert r.confidence_ and r.helpers_ == ()
        assert r.overhead_ == pytest.approx(float(b.test.agent_gflops[0]))  # the main agent, always
        res = run_comparison(b, ComparisonPlan(seeds=(0,), routers=["l2d-cascade"], n_boot=0, prices=(0.1,)))
        apgr[name] = res["routers"]["l2d-cascade"]["apgr"]
        p_err = r.p_err_[:, 0, 0]  # P̂[main wrong on the start]
        right = b.test.correct[:, 0]
        if name == "informative":
            assert p_err[~right].mean() > p_err[right].mean() + 0.3
            # scored on validation articles unless the plan says not to (a fit's own timing)
            plan = ComparisonPlan((0,), ["l2d-cascade"], n_boot=0, prices=(0.1,), validate=False)
            alone = run_comparison(b, plan)["routers"]["l2d-cascade"]
            assert "validation" in res["routers"]["l2d-cascade"] and "validation" not in alone
            assert alone["apgr"] == apgr[name]
    assert apgr["informative"] > 0.8 and apgr["informative"] > apgr["uninformative"] + 0.15, apgr


def test_a_share_budget_lands_on_its_target_on_the_test_articles(slices):
    """The surcharge starts where the share holds on the training articles and follows the budget
    query by query: the realised share lands on the target, and every decision is the least of
    what it shows (expected cost + the surcharge in force)."""
    b = slices["informative"]
    r = make_router("l2d-cascade").fit(b)
    costs = b.price_costs(0.1)
    for target in (0.1, 0.3, 0.6):
        d, res = budget_decision(r, costs, "share", target, n_boot=200)
        assert res.training_share <= target + 1e-9 and res.training_share > target - 0.05
        assert res.test_share == pytest.approx((d.choice != 0).mean())
        assert abs(res.test_share - target) <= 0.03, (target, res.test_share)
        lo, hi = res.test_share_ci
        assert lo <= res.test_share <= hi
        shown = expected_costs(r.p_err_, costs) + d.per_query["surcharge"][:, None] * [0, 1]
        assert np.allclose(d.expected, shown) and d.per_query["surcharge"].std() > 0  # it moved
        assert (d.expected[np.arange(len(d.choice)), d.choice] <= d.expected.min(axis=1) + 1e-12).all()
    g = b.train.agent_gflops
    budget = float(g[0] + 0.25 * (g.max() - g[0]))
    d, res = budget_decision(r, costs, "gflops", budget, n_boot=200)
    assert abs(res.test_gflops - budget) <= 0.05 * budget and res.note == ""
    assert res.reachable[0] <= budget <= res.reachable[1]
    _, res = budget_decision(r, costs, "gflops", float(g[0]) / 2, n_boot=50)  # below what always runs
    assert "cannot spend less than" in res.note
    with pytest.raises(ValueError, match="between 0 and 1"):
        budget_decision(r, costs, "share", 7.0)
    # the out-of-fold estimates come from heads that never saw the article
    oof = r.oof_error_proba()
    assert oof.shape == (len(b.train), 2, 2) and np.isfinite(oof).all()


def test_calibrate_threshold_keeps_ties_together():
    m = np.array([0.5, 0.5, 0.5, -1.0])
    assert calibrate_threshold(m, 0.5) == np.inf  # 3 tied at the top: none can go alone
    assert calibrate_threshold(m, 0.75) == pytest.approx(-0.25)
    margin, best = defer_margin(np.array([[[0.9, 0.5, 0.1]] * 2]), CostConfig((1.0, 1.0), (0.0, 0.5)))
    assert best.tolist() == [1] and margin[0] == pytest.approx(0.8)  # 1.8 − 1.0 (expert 2: 0.2 + 1.0)


def test_price_rule_makes_every_expert_pay_for_its_compute(slices):
    b = slices["informative"]
    g0, g = float(b.train.agent_gflops[0]), b.expert_gflops
    for lam in (0.0, 0.1, 1.0):
        costs = b.price_costs(lam)
        assert costs.beta == pytest.approx(tuple(lam * (g - g0) / 1000))
    m = evaluate_router(b, "l2d-cascade", b.price_costs(0.1))
    assert m["overhead_gflops"] == pytest.approx(g0) and 0 <= m["em"] <= 100
    res = run_comparison(
        b, ComparisonPlan(seeds=(0,), routers=["l2d-cascade", "zero"], n_boot=100, prices=(0.0, 0.5))
    )
    entry = res["routers"]["l2d-cascade"]
    assert res["price_points"] == [0.0, 0.5] and set(entry["tdl_price"]) == {"0", "0.5"}
    assert set(entry["tdl_price_below_matched_95"]) == {"0", "0.5"}
    assert entry["overhead_gflops"] == pytest.approx(g0)
    assert set(res["routers"]["zero"]["tdl_price"]) == {"0", "0.5"}


def test_validation_ranking_prefers_the_router_that_sees_the_signal(slices, monkeypatch):
    import l2d_core.evaluation.validation as V

    b = slices["informative"]
    ranking = rank_by_validation(b, ["l2d-cascade", "l2d-posthoc"])
    assert ranking[0].router_id in ("l2d-cascade", "l2d-posthoc") and ranking[0].gain >= ranking[1].gain
    scores = {r.router_id: r for r in ranking}
    router = make_router("l2d-cascade").fit(b)
    gain, price, aiq, low = validation_score(router)
    assert (scores["l2d-cascade"].gain, scores["l2d-cascade"].price) == pytest.approx((gain, price))
    assert scores["l2d-cascade"].gain_low == pytest.approx(low) and low < gain
    assert scores["l2d-cascade"].aiq == pytest.approx(aiq)
    # the AIQ's curve starts where no expert is worth calling (the main agent alone), not at the
    # price grid's cheapest point where that still defers doubtful questions (P3-albert: 37 GFLOPs
    # against the main agent's 5): no 0 EM is counted between them
    monkeypatch.setattr(V, "price_grid", lambda bench: (0.0, 0.1))
    g = b.train.agent_gflops
    gain, price, aiq, low = validation_score(router)
    cost, em, _ = validation_curve(router)
    least, ok = router.oof_outcome(b.price_costs(NO_DEFERRAL_PRICE))
    assert least.mean() == pytest.approx(g[0]) and cost.min() > g[0] + 1.0
    closed = M.aiq(np.append(cost, g[0]), np.append(em, 100 * ok.mean()), g.min(), g.max())
    assert aiq == pytest.approx(closed)
    assert aiq > M.aiq(cost, em, g.min(), g.max()) + 0.1
    worse = rank_by_validation(slices["uninformative"], ["l2d-cascade"])
    assert scores["l2d-cascade"].gain > 1.0 and scores["l2d-cascade"].gain > worse[0].gain + 1.0


def test_out_of_fold_estimates_come_from_the_cross_fitted_heads(slices, monkeypatch):
    """A router is ranked on its own cross-fitted heads: each training article scored by the head
    that never saw it, calibrated as that head is; no head is fitted for the ranking."""
    from scipy.special import expit

    from l2d_core.routers import trained
    from l2d_core.routers.calibration import crossfit_splits
    from l2d_core.routers.posthoc import _logits

    b = slices["informative"]
    router = make_router("l2d-cascade").fit(b)
    est, F = router.estimator_, router._features("train")

    def no_fit(*args, **kwargs):
        raise AssertionError("a head fitted for the out-of-fold estimates")

    monkeypatch.setattr(trained, "fitted", no_fit)
    oof = router.oof_error_proba()
    masks = crossfit_splits(b.train.titles, est.calibration_folds, est.config.seed)
    assert len(masks) == len(est.heads_) > 1 and sum((~m).astype(int) for m in masks).tolist() == [1] * len(F)
    for k, (head, seen) in enumerate(zip(est.heads_, masks)):
        assert not set(b.train.titles[~seen]) & set(b.train.titles[seen])  # whole articles held out
        z = _logits(head, F[~seen])
        assert np.allclose(oof[~seen], expit(z * est.platt_[k, :, :, 0] + est.platt_[k, :, :, 1]))
    assert not np.allclose(oof, est.predict_proba(F))  # not the mean of the heads that saw them


def test_validation_ranking_is_kept_on_disk(slices, monkeypatch):
    """A later page or process ranks the same pool without fitting a head again."""
    import l2d_core.evaluation.validation as V

    b = slices["informative"]
    first = rank_by_validation(b, ["l2d-cascade", "l2d-posthoc"])

    def no_fit(router):
        raise AssertionError("ranked again instead of reading the stored ranking")

    monkeypatch.setattr(V, "validation_score", no_fit)
    assert rank_by_validation(b, ["l2d-cascade", "l2d-posthoc"]) == first
    with pytest.raises(AssertionError, match="ranked again"):  # other routers: a new ranking
        rank_by_validation(b, ["l2d-cascade"])


def test_the_default_is_whole_before_it_is_shown_and_never_moves(slices, fresh_cache, monkeypatch):
    """``rank=False`` fits nothing and gives None until the ranking is on disk (a page then ranks
    before it shows a number); the default is chosen among the routers that read no embeddings —
    also on a benchmark that has them — so it is the same before and after they are computed; once
    ranked, the same call reads the same default back without fitting."""
    import l2d_core.evaluation.validation as V
    from l2d_core.app_logic.default_view import default_candidates, default_router
    from l2d_core.routers.registry import routers

    b = slices["informative"]
    assert b.has_embeddings
    real_score = V.validation_score
    scored = []

    def counted(router):
        scored.append(router.id)
        return real_score(router)

    monkeypatch.setattr(V, "validation_score", counted)
    assert default_router(b, rank=False) is None and scored == []
    ids = default_candidates(b)
    assert ids and not any(routers()[r].reads_embeddings for r in ids)
    assert any(routers()[r].reads_embeddings for r in V.candidates(b))  # left out of the default
    seen = []
    best = default_router(b, progress=lambda k, n, rid: seen.append((k, n, rid)))  # kept on disk
    assert seen == [(k, len(ids), rid) for k, rid in enumerate(ids, start=1)] and scored == ids
    assert {r.router_id for r in best.ranking} == set(ids)

    def no_fit(router):
        raise AssertionError("fitted for a ranking that was not asked for")

    monkeypatch.setattr(V, "validation_score", no_fit)
    again = default_router(b, rank=False)
    assert again == best and best.ranking[0].router_id == best.router_id
    assert best.price == best.ranking[0].price
    assert rank_by_validation(b, [r.router_id for r in best.ranking], compute=False) == best.ranking


def test_first_view_ranks_the_routers_ready_now(fresh_cache):
    """On an empty cache the post-hoc router waits for its helper agents: the first ranking has
    the routers that read only the pool, and once the helpers are read in, it has them all."""
    from l2d_core.evaluation.validation import candidates, waiting
    from l2d_core.routers.posthoc import posthoc_helpers
    from l2d_core.routers.posthoc_inputs import import_helpers

    b = slice_bench("P2", n_train=4, n_test=1)
    pending = waiting(b)
    helpers = posthoc_helpers("squad11", "match-lstm")
    assert helpers and set(pending) == {"l2d-posthoc"} and set(pending["l2d-posthoc"]) == set(helpers)
    ready = candidates(b, ready_only=True)
    assert "l2d-cascade" in ready and "l2d-posthoc" not in ready
    first = [r.router_id for r in rank_by_validation(b, ready_only=True)]
    assert "l2d-cascade" in first and "l2d-posthoc" not in first
    seen = []
    import_helpers(b, pending["l2d-posthoc"][:2], lambda k, n, agent: seen.append((k, n, agent)), processes=2)
    assert [(k, n) for k, n, _ in seen] == [(1, 2), (2, 2)] and {a for *_, a in seen} == set(helpers[:2])
    assert set(waiting(b)["l2d-posthoc"]) == set(helpers[2:])  # read in by the child processes
    import_helpers(b, helpers[2:], lambda k, n, agent: seen.append((k, n, agent)))
    assert [k for k, *_ in seen[2:]] == list(range(1, len(helpers) - 1))
    assert waiting(b) == {}
    assert {r.router_id for r in rank_by_validation(b, ready_only=True)} == {*first, "l2d-posthoc"}


def test_agents_read_in_by_child_processes_fail_with_the_childs_message(fresh_cache):
    from l2d_core.agents.read_in import import_agents
    from l2d_core.data import load_dataset

    with pytest.raises(ValueError, match="reading in the answers of no-such-agent failed: .*no-such-agent"):
        import_agents(load_dataset("squad11"), ["no-such-agent"], processes=1)
