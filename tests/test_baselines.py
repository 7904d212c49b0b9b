"""SPEC §8 baseline routers (l2d_core.routers.hybrid / quality / ensemble) and their place in
the router comparison.

Hand-made arrays for the pure helpers; a small real slice of SQuAD v1.1 (three training
articles, one test article, the real agents of P2 / P3) for each router's fit/predict and for
``run_comparison``. The slice's features are a hashed bag of words (no encoder: the frozen
encoder's embeddings cost minutes on a busy CPU, and the routers only need some features).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from _slices import slice_bench
from sklearn.base import clone

from l2d_core import report
from l2d_core.agents.routing_data import RoutingData
from l2d_core.evaluation import comparison as C
from l2d_core.evaluation.benchmark import BETA_POINTS, PRICE_POINTS, Benchmark
from l2d_core.evaluation.results import save_results
from l2d_core.method.costs import CostConfig
from l2d_core.method.training import FAST_CONFIG
from l2d_core.routers import trained
from l2d_core.routers.base import TARGET_SHARES
from l2d_core.routers.ensemble import majority_vote, rescore
from l2d_core.routers.estimator import NotFittedError
from l2d_core.routers.hybrid import HybridClassifier, hybrid_labels, share_thresholds
from l2d_core.routers.quality import (
    KNNAccuracy,
    MLPAccuracy,
    cost_aware_choice,
    lambda_grid,
    quality_targets,
    utility_choice,
)
from l2d_core.routers.registry import router_ids


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """The heads are tiny: one torch thread is as fast on an idle machine and far faster on a
    busy one (no oversubscription)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# ------------------------------------------------------------------------------- toy data


def _toy(ok: np.ndarray, f1=None, answers=None, gflops=(5.0, 100.0, 1000.0)) -> RoutingData:
    ok = np.asarray(ok, dtype=bool)
    n, a = ok.shape
    return RoutingData(
        dataset="toy",
        agent_ids=tuple("abcdefgh"[:a]),
        qids=tuple(f"q{i}" for i in range(n)),
        titles=np.array(["t"] * n, dtype=object),
        start_ok=ok,
        end_ok=ok,
        em=ok.astype(float),
        f1=ok.astype(float) if f1 is None else np.asarray(f1, float),
        gflops=np.broadcast_to(np.asarray(gflops[:a], float), (n, a)).copy(),
        answers=np.full((n, a), None, dtype=object) if answers is None else np.asarray(answers, dtype=object),
    )


def test_calibrate_threshold_hits_the_target_share():
    rng = np.random.default_rng(0)
    s = rng.beta(2, 5, size=2000)
    shares = np.linspace(0, 1, 21)
    thr = share_thresholds(s, shares)
    got = np.array([(s < t).mean() for t in thr])  # share sent to the expert
    np.testing.assert_allclose(got, shares, atol=1e-12)
    # on fresh scores of the same distribution the share is close (RouteLLM's assumption)
    fresh = rng.beta(2, 5, size=20000)
    np.testing.assert_allclose([(fresh < t).mean() for t in thr], shares, atol=0.03)
    # ties: never more than the target goes to the expert
    assert (np.full(10, 0.3) < share_thresholds(np.full(10, 0.3), 0.5)).mean() == 0.0
    assert isinstance(share_thresholds(s, 0.25), float)
    with pytest.raises(ValueError):
        share_thresholds(s, 1.5)
    with pytest.raises(ValueError):
        share_thresholds(np.array([]), 0.5)


def test_hybrid_labels_by_hand():
    ok = np.array([[1, 1, 1], [0, 1, 1], [0, 0, 1], [1, 0, 0], [0, 0, 0]])
    f1 = np.array([[1, 1, 1], [0.6, 1, 1], [0.0, 0.2, 1], [1, 0, 0], [0.5, 0.5, 0]])
    d = _toy(ok, f1)
    # L = agent 2: S at least as good (both endpoints) on rows 0, 3, 4
    assert hybrid_labels(d, "det", 2)[0].tolist() == [1, 0, 0, 1, 1]
    assert hybrid_labels(d, "det", 1)[0].tolist() == [1, 0, 1, 1, 1]
    # with the paper's quality −c_j and a consultation cost β ≥ 1 per endpoint, S always "wins"
    assert hybrid_labels(d, "det", 2, CostConfig((1.0, 1.0), (0.0, 1.0)))[0].tolist() == [1] * 5
    # soft label 1 − (1 − F1_S)·F1_L
    np.testing.assert_allclose(hybrid_labels(d, "prob", 2)[0], [1, 0.6, 0.0, 1, 1])
    # trans: F1_S − F1_L = (0, −0.4, −1, 1, 0.5) against L = 2; t = 0 gives 0.6, t = −0.5
    # (S better by ≥ 0.5) gives 0.4: equally far from 0.5, the smaller |t| wins
    y, t = hybrid_labels(d, "trans", 2)
    assert t == 0.0 and y.tolist() == [1, 0, 0, 1, 1]
    y, t = hybrid_labels(_toy(ok[:4], f1[:4]), "trans", 2)  # d = (0, −0.4, −1, 1): t = 0 → 0.5
    assert t == 0.0 and y.mean() == 0.5
    with pytest.raises(ValueError):
        hybrid_labels(d, "nope", 2)
    with pytest.raises(ValueError):
        hybrid_labels(d, "det", 0)


def test_utility_choice_sweeps_from_cheapest_to_best():
    rng = np.random.default_rng(1)
    q = rng.random((300, 4))
    cost = np.array([1.0, 3.0, 40.0, 500.0])
    grid = lambda_grid(cost)
    spent = [cost[utility_choice(q, lam, cost)].mean() for lam in grid]
    assert np.all(np.diff(spent) >= -1e-12)  # more willingness to pay never spends less
    assert (utility_choice(q, 0.0, cost) == 0).all()
    np.testing.assert_array_equal(utility_choice(q, np.inf, cost), q.argmax(axis=1))
    np.testing.assert_array_equal(utility_choice(q, grid[-2], cost), q.argmax(axis=1))  # the grid reaches it
    with pytest.raises(ValueError):
        utility_choice(q, -1.0, cost)
    # the β₁ rule is the plug-in policy with 1 − quality as the error probability
    costs = CostConfig((1.0, 1.0, 1.0), (0.05, 0.1, 0.3))
    expected = ((1 - q) + np.r_[0.0, costs.beta]).argmin(axis=1)
    np.testing.assert_array_equal(cost_aware_choice(q, costs), expected)


def test_majority_vote_and_ensemble_em_by_hand():
    answers = [
        ["Paris", "paris", "Lyon"],  # 2 votes: Paris (agents 0, 1)
        ["Lyon", "Paris", "Nice"],  # 3-way tie → strongest (agent 2): Nice
        ["the Seine", "Seine", "Loire"],  # "the" is dropped by normalization: Seine
        [None, "Loire", "Rhone"],  # None abstains; tie Loire/Rhone → strongest: Rhone
        ["Rhine", None, None],  # the only answer
        [None, None, None],  # no answer at all: the strongest agent's (None)
    ]
    golds = [["Paris"], ["Paris"], ["Seine River", "Seine"], ["Loire"], ["Rhine"], ["x"]]
    # training EM: agent 2 strongest, then 0, then 1
    # tie order: training EM, agent 2 strongest, then 0, then 1
    order = (2, 0, 1)
    win = majority_vote(np.array(answers, dtype=object), order)
    assert win.tolist() == [0, 2, 0, 2, 0, 2]
    texts = [row[j] for row, j in zip(answers, win)]
    assert list(texts) == ["Paris", "Nice", "the Seine", "Rhone", "Rhine", None]
    em, f1 = rescore(texts, golds)
    assert em.tolist() == [1, 0, 1, 0, 1, 0]  # by hand
    assert f1.tolist() == [1, 0, 1, 0, 1, 0]
    assert majority_vote(np.array([["a", "b"]], dtype=object), [1, 0]).tolist() == [1]
    with pytest.raises(ValueError):
        majority_vote(np.array([["a", "b"]], dtype=object), [0, 0])


LONGER = FAST_CONFIG.but(epochs=40)  # 600 toy rows are 3 batches an epoch
ESTIMATORS = {
    "hybrid": lambda: HybridClassifier(LONGER),
    "knn": lambda: KNNAccuracy(k=15),
    "mlp": lambda: MLPAccuracy(LONGER),
}


def _scores(est, X):
    return est.predict_proba(X) if isinstance(est, HybridClassifier) else est.predict(X)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_estimator_contract_and_a_planted_signal(name):
    """``__init__`` stores arguments only; ``fit(X, y)`` returns self; the estimator finds a
    feature that tells when the main agent is right."""
    rng = np.random.default_rng(0)
    n = 600
    main_ok = rng.random(n) < 0.6
    ok = np.stack([main_ok, rng.random(n) < 0.9, np.ones(n, bool)], axis=1)
    signal = main_ok[:, None] + 0.3 * rng.standard_normal((n, 4))
    X = np.concatenate([signal, 0.5 * rng.standard_normal((n, 4))], axis=1)
    data = _toy(ok)
    est = ESTIMATORS[name]()
    y = hybrid_labels(data, "det", 2)[0] if name == "hybrid" else quality_targets(data, "em")
    assert not [k for k in vars(est) if k.endswith("_")]  # learned state exists only after fit
    assert clone(est).get_params() == est.get_params()  # scikit-learn's contract
    with pytest.raises(NotFittedError):
        _scores(est, X)
    with pytest.raises(ValueError):
        est.fit(X[:10], y)
    assert est.fit(X, y) is est
    s = _scores(est, X)
    if name == "hybrid":
        assert s.shape == (n,) and 0 <= s.min() <= s.max() <= 1
        assert s[main_ok].mean() > s[~main_ok].mean() + 0.3
    else:
        assert s.shape == (n, 3) and 0 <= s.min() <= s.max() <= 1
        assert s[main_ok, 0].mean() > s[~main_ok, 0].mean() + 0.3
        assert (utility_choice(s, 0.0, np.array([1.0, 2.0, 3.0])) == 0).all()  # cheapest


@pytest.mark.parametrize("name", ["hybrid", "mlp"])
def test_head_estimators_survive_save_and_load(name, tmp_path):
    """A checkpoint holds what the estimator learned and how it was built: scores and parameters
    come back the same."""
    rng = np.random.default_rng(1)
    ok = rng.random((300, 3)) < [0.6, 0.8, 0.9]
    X = rng.standard_normal((300, 6)).astype(np.float32)
    data = _toy(ok, f1=ok * 0.9)
    y = hybrid_labels(data, "prob", 2)[0] if name == "hybrid" else quality_targets(data, "f1")
    est = ESTIMATORS[name]().fit(X, y)
    loaded = type(est).load(est.save(tmp_path / name))
    assert loaded.get_params() == est.get_params()
    np.testing.assert_allclose(_scores(loaded, X), _scores(est, X), rtol=1e-6)


# ------------------------------------------------------------------------------- a real slice


@pytest.fixture(scope="module")
def p3_slice(real_data):
    return slice_bench("P3")


@pytest.fixture(scope="module")
def p2_slice(real_data):
    return slice_bench("P2")


def test_each_router_fits_and_predicts_on_a_real_slice(p3_slice):
    b = p3_slice
    n, a = len(b.test), b.test.n_agents
    assert a == 3 and 150 < n < 600 and len(b.train) > 300
    cfg = FAST_CONFIG.but(epochs=5)
    strong = b.train.agent_ids.index("bert-ens")  # the expert of best training EM
    for kind in ("det", "prob", "trans"):
        y, t = hybrid_labels(b.train, kind, strong)
        assert 0 < y.mean() < 1 and np.isfinite(t)
        est = HybridClassifier(config=cfg).fit(b.X_train, y)
        s_tr, s_te = est.predict_proba(b.X_train), est.predict_proba(b.X_test)
        assert s_te.shape == (n,) and np.all((s_te >= 0) & (s_te <= 1))
        for share in (0.0, 0.3, 0.7, 1.0):  # calibrated on the training scores
            thr = share_thresholds(s_tr, share)
            assert (s_tr < thr).mean() == pytest.approx(share, abs=0.01)
    for est, target in (
        (KNNAccuracy(k=10), "em"),
        (MLPAccuracy(config=cfg), "em"),
        (MLPAccuracy(config=cfg), "f1"),
    ):
        q = est.fit(b.X_train, quality_targets(b.train, target)).predict(b.X_test)
        assert q.shape == (n, a) and np.all((q >= 0) & (q <= 1))
        assert (utility_choice(q, 0.0, b.test.agent_gflops) == 0).all()  # match-lstm is the cheapest agent
        assert (utility_choice(q, np.inf, b.test.agent_gflops) == q.argmax(1)).all()
    # the ensemble: re-scoring the voted text against the gold answers agrees with the agent
    # cache's EM of the agent whose answer won (same normalized text)
    from l2d_core.routers.registry import make_router

    ens = make_router("ensemble").fit(b)
    win = ens.win_
    em, f1 = rescore(b.test.answers[np.arange(n), win], [r.answers for r in b.test_records])
    np.testing.assert_array_equal(em, b.test.em[np.arange(n), win])
    np.testing.assert_allclose(f1, b.test.f1[np.arange(n), win])


OURS = ["r-det", "r-prob", "r-trans", "knn", "mlp", "ensemble", "random", "zero", "oracle"]


@pytest.fixture(scope="module")
def p3_results(p3_slice):
    ids = OURS + [i for i in router_ids(p3_slice) if i.startswith("agent:")]
    return C.run_comparison(p3_slice, C.ComparisonPlan(seeds=(0, 1), routers=ids, n_boot=200))


def test_the_stable_ids_are_registered(p3_slice):
    ids = router_ids(p3_slice)
    for rid in ("l2d-sdl", "l2d-plugin", "l2d-posthoc", *OURS):
        assert rid in ids
    assert ids[-3:] == ["agent:match-lstm", "agent:rnet-plus", "agent:bert-ens"]


def test_run_comparison_fields_on_a_three_agent_slice(p3_slice, p3_results, tmp_path):
    res, b = p3_results, p3_slice
    keys = {f"{x:g}" for x in BETA_POINTS}
    assert res["seeds"] == [0, 1] and res["bootstrap"]["n_boot"] == 200
    assert res["pgr_weak"] == "match-lstm" and res["pgr_strong"] == "bert-ens"
    for rid, r in res["routers"].items():
        assert np.isfinite(r["aiq"]) and 0 <= r["aiq"] <= 100, rid
        assert np.isfinite(r["apgr"]), rid  # J + 1 agents: the generalised APGR
        assert len(r["aiq_seeds"]) == 2 and r["aiq_std"] >= 0
        lo, hi = r["aiq_ci"]
        assert lo <= hi and r["apgr_ci"][0] <= r["apgr_ci"][1]
        assert set(r["tdl"]) == set(r["tdl_diff_ci"]) == set(r["tdl_below_random_95"]) == keys, rid
        for k in keys:
            d_lo, d_hi = r["tdl_diff_ci"][k]
            assert d_lo <= r["tdl_diff"][k] + 1e-9 and r["tdl_diff"][k] <= d_hi + 1e-9
            assert r["tdl_diff"][k] == pytest.approx(r["tdl"][k] - _uniform_tdl(b, float(k)))
        front = r["pareto"]
        pts = r["points"]
        assert front and all(0 <= i < len(pts) for i in front)
        for i in range(len(pts)):  # nothing off the front beats a front point outright
            for j in front:
                assert not (pts[i]["gflops"] < pts[j]["gflops"] and pts[i]["em"] > pts[j]["em"])
        assert all("_q" not in p for p in pts) and all("share_strong" in p for p in pts)
    rs = res["routers"]
    # deterministic routers: no spread over seeds
    for rid in ("knn", "ensemble", "oracle", "zero", "agent:bert-ens"):
        assert rs[rid]["aiq_std"] == 0.0, rid
    # points: β₁ points + the calibrated threshold sweep / the λ grid + the per-TFLOP prices
    for rid in ("r-det", "r-prob", "r-trans"):
        assert len(rs[rid]["points"]) == len(BETA_POINTS) + len(TARGET_SHARES) + len(PRICE_POINTS)
        shares = [p["share_strong"] for p in rs[rid]["points"] if p.get("dense") and p.get("price") is None]
        assert shares[0] == 0.0 and shares[-1] == 1.0
    grid = len(lambda_grid(b.train.agent_gflops))
    assert len(rs["knn"]["points"]) == len(BETA_POINTS) + grid + len(PRICE_POINTS)
    # the ensemble pays every agent and calls every agent
    ens = rs["ensemble"]["points"][0]
    assert ens["gflops"] == pytest.approx(sum(res["agent_gflops"].values()))
    # every agent is called (share 1); the allocation is whose answer the vote kept (sums to 1)
    assert ens["share_strong"] == 1.0 and sum(ens["allocation"].values()) == pytest.approx(1.0)
    main = res["agents"][0]
    assert ens["consulted"] == 1.0 and ens["answered_by_expert"] == pytest.approx(1 - ens["allocation"][main])
    # the oracle beats uniform random allocation at every β₁, beyond the bootstrap noise
    assert all(rs["oracle"]["tdl_below_random_95"].values())
    # one Pareto front over every router's points (the oracle is a bound, not a router)
    front = res["pareto_front"]
    assert front and "oracle" not in {p["router"] for p in front}
    assert [p["gflops"] for p in front] == sorted(p["gflops"] for p in front)
    assert np.all(np.diff([p["em"] for p in front]) > 0)
    # strict JSON, and the summary table reads it
    path = save_results(res, tmp_path / "slice")
    doc = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    table = report.summary_frame(doc)
    assert set(table["router"]) == set(rs) and {"AIQ std", "APGR 95% lo"} <= set(table.columns)


def _uniform_tdl(b: Benchmark, beta1: float) -> float:
    from l2d_core.method.costs import cost_matrix, query_costs

    return float(query_costs(cost_matrix(b.test.errors, b.costs(beta1))).mean())


def test_two_agent_slice_zero_and_single_agents(p2_slice):
    res = C.run_comparison(
        p2_slice, C.ComparisonPlan(seeds=(0,), routers=["zero", "ensemble", "agent:bert-ens"], n_boot=100)
    )
    rs = res["routers"]
    assert rs["zero"]["apgr"] == pytest.approx(0.5)  # random mixing of the two agents
    assert rs["zero"]["apgr_ci"] == pytest.approx([0.5, 0.5])
    # two agents: a tie of votes goes to the strongest agent, so the ensemble answers like it
    ens, best = rs["ensemble"]["points"][0], rs["agent:bert-ens"]["points"][0]
    assert ens["em"] == pytest.approx(best["em"]) and ens["tdl"] == pytest.approx(best["tdl"])


def test_baseline_scores_are_memoized_on_disk(p2_slice, monkeypatch):
    calls = []
    real_fit = KNNAccuracy.fit

    def counting_fit(self, X, y):
        calls.append(1)
        return real_fit(self, X, y)

    monkeypatch.setattr(KNNAccuracy, "fit", counting_fit)
    first = C.run_router(p2_slice, "knn", 0)
    again = C.run_router(p2_slice, "knn", 0)
    assert len(calls) <= 1 and [p["em"] for p in first] == [p["em"] for p in again]
    key = lambda est: trained.artifact_key("knn", p2_slice, trained.estimator_params(est))
    assert key(KNNAccuracy()) == key(KNNAccuracy()) and key(KNNAccuracy()) != key(KNNAccuracy(k=7))
