"""Routers compared on validation articles only — the training articles, each scored out of fold
— so that the one users get by default is chosen without looking at the test articles.

Each ranked router's cost–EM curve (the plug-in routers', the two-stage cascade's) is traced on
the training articles from its out-of-fold error estimates (the BENCHMARK.md β₁ points and a
dense β₁ grid, with its own cost accounting); its validation AIQ is the area under that
curve's upper hull over the pool's GFLOPs range.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from . import metrics as M
from . import store
from .benchmark import BETA_POINTS, Benchmark
from .registry import ROUTERS, make_router
from .router import DENSE_BETAS, Router

__all__ = ["validation_curve", "validation_aiq", "rank_by_validation", "candidates", "waiting"]

RANKING_KIND = "validation-ranking-2"  # 2: the ranked ids are stored with their AIQ


def validation_curve(router: Router) -> tuple[np.ndarray, np.ndarray]:
    """(mean GFLOPs per query, EM %) of a fitted router (``validated``) on the training articles,
    one point per β₁ (benchmark points and the dense grid), from its out-of-fold estimates."""
    bench = router.bench_
    cost, em = [], []
    for b in (*BETA_POINTS, *DENSE_BETAS):
        g, ok = router.oof_outcome(bench.costs(b))
        cost.append(float(g.mean()))
        em.append(100 * float(ok.mean()))
    return np.array(cost), np.array(em)


def validation_aiq(router: Router) -> float:
    """AIQ of :func:`validation_curve` over the GFLOPs range of the pool's agents."""
    g = router.bench_.train.agent_gflops
    cost, em = validation_curve(router)
    return M.aiq(cost, em, float(g.min()), float(g.max()))


def candidates(bench: Benchmark, ready_only: bool = False) -> list[str]:
    """The registry's routers ranked on validation (``validated``: the plug-in routers and the
    two-stage cascade) that can run on ``bench`` (ex-ante ones need embeddings);
    ``ready_only``: only those whose inputs are read in already (see :func:`waiting`)."""
    return [
        rid
        for rid, cls in ROUTERS.items()
        if cls.validated
        and (bench.has_embeddings or not cls.reads_embeddings)
        and not (ready_only and make_router(rid).agents_to_import(bench))
    ]


def waiting(bench: Benchmark) -> dict[str, tuple[str, ...]]:
    """The candidates that read agents whose answers are not read in yet: router id → agents."""
    todo = {rid: make_router(rid).agents_to_import(bench) for rid in candidates(bench)}
    return {rid: agents for rid, agents in todo.items() if agents}


def rank_by_validation(
    bench: Benchmark,
    router_ids: Sequence[str] | None = None,
    ready_only: bool = False,
    fitted: Callable[[str], Router] | None = None,
    compute: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[tuple[str, float]] | None:
    """``(router id, validation AIQ)``, best first, for the plug-in routers of the registry (with
    ``ready_only``: those whose inputs are read in already); memoized on disk (keyed by the
    benchmark and every router's settings), so only the first ranking of a pool on a machine
    fits the out-of-fold heads. ``fitted(router id)``: where the fitted routers come from (a
    caller that keeps them, such as the dashboard, fits each once for the ranking and its use).
    ``compute=False``: the ranking only when it is on disk already, else None (nothing is fitted).
    ``progress(k, n, router id)``: called as each router is scored, when the ranking is computed."""
    ids = candidates(bench, ready_only) if router_ids is None else list(router_ids)
    routers = {rid: make_router(rid) for rid in ids}
    params = {rid: [type(r).__name__, repr(sorted(r.params.items()))] for rid, r in routers.items()}
    fit = fitted or (lambda rid: routers[rid].fit(bench))

    def compute_aiq() -> dict[str, np.ndarray]:  # the ids too: the key does not depend on their order
        aiq = []
        for k, rid in enumerate(ids, start=1):
            aiq.append(validation_aiq(fit(rid)))
            if progress:
                progress(k, len(ids), rid)
        return {"ids": np.array(ids, dtype=str), "aiq": np.array(aiq)}

    memo = store.memo_arrays(
        RANKING_KIND, bench, params, compute_aiq if compute else None, bench.has_embeddings
    )
    if memo is None:
        return None
    return sorted(zip(map(str, memo["ids"]), map(float, memo["aiq"])), key=lambda s: -s[1])
