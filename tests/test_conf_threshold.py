"""The supervisor baseline ``conf-threshold``: a router module of the registry that defers to an
expert when the main agent's own confidence is below a threshold chosen on the training articles."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from l2d_core.evaluation.benchmark import prepare
from l2d_core.evaluation.budget_results import budget_decision
from l2d_core.evaluation.points import router_points
from l2d_core.method.costs import cost_matrix, query_costs
from l2d_core.routers.base import exportable, supports_budget
from l2d_core.routers.conf_threshold import thresholds
from l2d_core.routers.registry import make_router, router_class, router_ids


@pytest.fixture(scope="module")
def pllm(real_data):
    return prepare("squad20", "PLLM", features_needed=False)


@pytest.fixture(scope="module")
def router(pllm):
    return make_router("conf-threshold").fit(pllm, seed=0)


def test_it_is_a_registry_router_offered_only_where_the_main_agent_has_confidence(pllm, real_data):
    assert "conf-threshold" in router_ids() and "conf-threshold" in router_ids(pllm)
    cls = router_class("conf-threshold")
    assert exportable(cls) and supports_budget(cls) and cls.reads_answers
    assert make_router("conf-threshold").needs(pllm).answers == ("bert-tiny",)
    p2 = prepare("squad11", "P2", features_needed=False)
    assert "conf-threshold" not in router_ids(p2) and "l2d-cascade" in router_ids(p2)
    with pytest.raises(ValueError, match="match-lstm does not give it on every question of pool P2") as err:
        make_router("conf-threshold").fit(p2)
    assert "\n" not in str(err.value)


def test_at_a_cost_setting_the_threshold_is_the_least_costly_on_training(pllm, router):
    conf_train, conf_test = pllm.train.score[:, 0], pllm.test.score[:, 0]
    for costs in (pllm.costs(0.0), pllm.latency_costs(0.05), pllm.price_costs(0.001)):
        qc = query_costs(cost_matrix(pllm.train.errors, costs))
        # every candidate, brute force: defer when the confidence is below c
        cands = np.unique(np.quantile(conf_train, np.linspace(0, 1, 41)))
        cands = np.concatenate([cands, [conf_train.max() + 1.0]])
        best = min(np.where(conf_train < c, qc[:, 1], qc[:, 0]).mean() for c in cands)
        d = router.decide(costs)
        c = d.extra["threshold"]
        assert np.where(conf_train < c, qc[:, 1], qc[:, 0]).mean() == pytest.approx(best)
        assert np.array_equal(d.choice, np.where(conf_test < c, 1, 0))
        assert d.overhead_gflops == pytest.approx(pllm.test.agent_gflops[0])  # the main agent always runs
    assert router.decide(pllm.latency_costs(1.0)).choice.sum() == 0  # a second costs more than it saves


def test_the_sweep_runs_from_never_to_always_deferring(pllm, router):
    pts = router_points(router, betas=(0.0,))
    sweep = [p for p in pts if p.get("to") == "gpt3-davinci"]
    assert len(sweep) == len(thresholds(-pllm.train.score[:, 0]))
    em = 100 * pllm.test.em.mean(axis=0)
    shares = [p["share_strong"] for p in sweep]
    assert shares[0] == 1.0 and sweep[0]["em"] == pytest.approx(em[1])
    assert min(shares) < 0.01 and max(p["em"] for p in sweep) > em.max()  # mixing beats both
    assert all("latency_s" in p for p in pts)  # the logs carry latency


def test_a_budget_meets_its_share_on_training_and_follows_it_on_test(pllm, router):
    for target in (0.1, 0.4):
        d, res = budget_decision(router, pllm.costs(0.05), "share", target, n_boot=50)
        assert res.training_share <= target + 1e-9 and res.training_share > target - 0.01
        assert abs(res.test_share - target) < 0.03 and set(np.unique(d.choice)) <= {0, 1}
    d, res = budget_decision(router, pllm.costs(0.05), "gflops", 30000.0, n_boot=50)
    assert abs(res.test_gflops - 30000.0) / 30000.0 < 0.1


def test_frozen_it_routes_queries_from_the_main_agents_confidence(pllm, router, tmp_path):
    costs = pllm.costs(0.05)
    frozen = router.freeze(costs)
    dep = frozen.deployed_
    assert dep.needs.answers == ("bert-tiny",) and not hasattr(router, "deployed_")
    signals = SimpleNamespace(answers=lambda: [{"confidence": c} for c in pllm.test.confidence[:, 0]])
    assert np.array_equal(frozen.route(signals).choice, router.decide(costs).choice)
    again = make_router("conf-threshold").restore(dep.config, tmp_path, dep.needs, dep.overhead_gflops)
    assert np.array_equal(again.route(signals).choice, router.decide(costs).choice)
    missing = SimpleNamespace(answers=lambda: [{"confidence": None}])
    with pytest.raises(ValueError, match="bert-tiny gave no confidence for 1 queries"):
        frozen.route(missing)


def test_with_abstention_in_the_pool_it_may_defer_to_saying_no_answer(real_data):
    bench = prepare("squad20", "PLLM-abstain", features_needed=False)
    r = make_router("conf-threshold").fit(bench)
    d = r.decide(bench.costs(0.1))
    assert set(np.unique(d.choice)) <= {0, 1, 2}
    em = 100 * bench.test.em[np.arange(len(d.choice)), d.choice].mean()
    assert em > 100 * bench.test.em.mean(axis=0).max()  # better than any agent alone
