"""The view users get by default pays for itself: on the default pool, the router and price chosen
on validation articles are above random mixing of single agents on the test articles — by the
whole 95% interval — and the default pool is the one where routing pays the most on validation."""

from __future__ import annotations

import pytest

from l2d_core.agents import get_pool
from l2d_core.agents.catalog import builtin_pool_names
from l2d_core.app_logic.default_view import default_router
from l2d_core.app_logic.explorer import router_view
from l2d_core.evaluation.benchmark import prepare
from l2d_core.routers.registry import make_router
from pages.ui.defaults import DATASET_CHOICES, DEFAULT_POOL


def test_the_default_view_is_above_random_mixing_on_the_test_articles(real_data):
    bench = prepare(DATASET_CHOICES[0], DEFAULT_POOL, features_needed=False)
    choice = default_router(bench)
    assert choice.pays and choice.ranking[0].router_id == choice.router_id
    view = router_view(bench, make_router(choice.router_id).fit(bench), bench.price_costs(choice.price))
    lo, hi = view.metrics["gain_ci"]
    assert lo > 0, (
        f"{choice.router_id} at λ = {choice.price}: {view.metrics['gain']:+.2f} EM ({lo:+.2f}, {hi:+.2f})"
    )


@pytest.mark.slow
def test_the_default_pool_is_where_routing_pays_the_most(real_data):
    """Every built-in pool of the default dataset, each at its best router and price on validation
    (the ranking ``scripts/rank_pools.py`` prints)."""
    dataset = DATASET_CHOICES[0]
    gains = {}
    for name in sorted(builtin_pool_names()):
        pool = get_pool(name)
        if pool.dataset != dataset:
            continue
        bench = prepare(dataset, name, features_needed=False)
        gains[name] = default_router(bench).gain
    assert DEFAULT_POOL in gains and max(gains, key=gains.get) == DEFAULT_POOL, gains
