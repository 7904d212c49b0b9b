"""Export a router from a pool and a cost setting (or budget) in one call: prepare the benchmark,
fit the router on the training articles (stored heads are reused), freeze it, save it."""

from __future__ import annotations

from pathlib import Path

from ..evaluation.benchmark import prepare
from ..evaluation.registry import make_router, router_class
from ..method.costs import CostConfig
from .deployed import DeployedRouter, deploy

__all__ = ["export_router"]


def export_router(
    out: str | Path,
    dataset: str,
    pool: str,
    router_id: str,
    costs: CostConfig | None = None,
    price: float | None = None,
    beta1: float | None = None,
    budget: tuple[str, float] | None = None,
    seed: int = 0,
    progress: bool = False,
) -> DeployedRouter:
    """Fit ``router_id`` on ``pool`` (BENCHMARK.md training articles) and save it to ``out`` at
    ``costs``, or at the per-TFLOP price ``price``, or at ``beta1`` by the GFLOPs rule (default:
    the price rule at λ = 0.1, the dashboard's default)."""
    cls = router_class(router_id)
    bench = prepare(
        dataset, pool, progress=progress, features_needed=cls is not None and cls.reads_embeddings
    )
    if costs is None:
        costs = (
            bench.costs(beta1) if beta1 is not None else bench.price_costs(0.1 if price is None else price)
        )
    router = make_router(router_id).fit(bench, seed)
    deployed = deploy(router, costs, budget)
    deployed.save(out)
    return deployed
