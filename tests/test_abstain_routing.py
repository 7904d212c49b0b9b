"""Issue 37, item 3: on PLLM-abstain (bert-tiny → GPT-3, and ``abstain`` at no cost) the L2D
cascade reads the confidence the supervisor baseline reads, and must not lose to it.

Why it lost: (1) with no answer text from the main agent its features were 30 columns about the
question alone beside the confidence, which blurred the split between bert-tiny and ``abstain``;
it now reads the confidence alone there (``feature_set``); (2) ``abstain`` is free at every cost
setting, so its curve jumped from no deferral to ~70% of questions deferred and never traced the
shares between; it now also has points at target shares of expert calls (``share_points``)."""

from __future__ import annotations

import numpy as np
import pytest

from l2d_core.evaluation.benchmark import prepare
from l2d_core.evaluation.curve_summary import curve_summary
from l2d_core.evaluation.points import router_points
from l2d_core.routers.posthoc_inputs import feature_set
from l2d_core.routers.registry import make_router


@pytest.fixture(scope="module")
def bench(real_data):
    return prepare("squad20", "PLLM-abstain", features_needed=False)


def _summary(bench, router) -> dict:
    g = bench.test.gflops.mean(axis=0)
    return curve_summary(bench, router_points(router), float(g.min()), float(g.max()))


def test_a_main_agent_without_answer_text_is_read_by_its_confidence(bench, real_data):
    assert feature_set(bench, "answer+extra", True) == "confidence"
    assert feature_set(bench, "answer+extra", False) == "answer+extra"  # nothing else to read
    p2 = prepare("squad11", "P2", features_needed=False)
    assert feature_set(p2, "answer+extra", False) == "answer+extra"


def test_the_cascade_matches_the_confidence_threshold_on_pllm_abstain(bench):
    cascade = make_router("l2d-cascade").fit(bench, 0)
    threshold = make_router("conf-threshold").fit(bench, 0)
    ours, theirs = _summary(bench, cascade), _summary(bench, threshold)
    assert cascade.features_ == "confidence"
    assert ours["aiq"] >= theirs["aiq"] - 1e-9, (ours, theirs)
    assert ours["apgr"] >= theirs["apgr"], (ours, theirs)
    shares = [p.decision.extra.get("target_share") for p in cascade.sweep()]
    assert sum(s is not None for s in shares) >= 41
    # the shares between none and the plain rule's are traced: some point defers 20–40% of questions
    deferred = [float((p.decision.choice != 0).mean()) for p in cascade.sweep()]
    assert any(0.2 <= d <= 0.4 for d in deferred) and np.isfinite(ours["apgr"])


def test_abstention_is_its_own_column_not_an_experts_answer(bench):
    from l2d_core.app_logic.explorer import metric_tiles
    from l2d_core.evaluation.points import decision_metrics
    from l2d_core.routers.decision import Decision

    n, j = len(bench.test), bench.test.agent_ids.index("abstain")
    choice = np.where(np.arange(n) % 4 == 0, j, np.where(np.arange(n) % 4 == 1, 1, 0))
    m, _ = decision_metrics(bench, Decision(choice, 0.0, data=bench.test), bench.costs(0.5))
    assert m["abstained"] == pytest.approx((choice == j).mean())
    assert m["answered_by_expert"] == pytest.approx((choice == 1).mean())
    assert m["consulted"] == pytest.approx((choice == 1).mean())
    labels = [t["label"] for t in metric_tiles(m, None)]
    assert "Abstained" in labels and "Answered by an expert" in labels
    p2 = prepare("squad11", "P2", features_needed=False)
    m2, _ = decision_metrics(p2, Decision(np.ones(len(p2.test), int), 0.0, data=p2.test), p2.costs(0.5))
    assert "abstained" not in m2 and m2["answered_by_expert"] == 1.0
