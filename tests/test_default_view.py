"""The view users get by default pays for itself: on the default pool, the router and price chosen
on validation articles are above random mixing of single agents on the test articles — by the
whole 95% interval — and the default pool is the one where routing pays the most on validation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from l2d_core.agents import get_pool
from l2d_core.agents.catalog import builtin_pool_names
from l2d_core.app_logic.default_view import default_candidates, default_ranking_memo, default_router
from l2d_core.app_logic.explorer import router_view
from l2d_core.evaluation.benchmark import prepare
from l2d_core.evaluation.validation import ranking_key
from l2d_core.routers.registry import make_router
from l2d_core.routers.trained import cached_fit, recording, shipped_file
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


def test_the_shipped_default_ranking_is_what_the_default_pool_computes(real_data):
    """The default pool's ranking ships with the package (``scripts/rank_pools.py --ship``) under the
    content key of its data and the routers' settings: it is current (a fresh clone reads it), and
    computing it again here gives the same routers and scores."""
    bench = prepare(DATASET_CHOICES[0], DEFAULT_POOL, features_needed=False)
    key, fresh = default_ranking_memo(bench)
    path = shipped_file(key)
    assert path.is_file(), (
        f"the shipped ranking of {DEFAULT_POOL} is stale: run python scripts/rank_pools.py --ship"
    )
    with np.load(path, allow_pickle=False) as shipped:
        assert shipped["ids"].tolist() == fresh["ids"].tolist()
        np.testing.assert_allclose(shipped["scores"], fresh["scores"], rtol=0, atol=1e-6, equal_nan=True)
    assert default_router(bench, rank=False).router_id == fresh["ids"][np.argmax(fresh["scores"][:, 0])]


@pytest.mark.slow
def test_every_shipped_ranking_is_current_and_listed(real_data):
    """Every built-in pool's default ranking is shipped under its current key, and nothing else is."""
    index = _index()
    assert set(index) == set(builtin_pool_names())
    for name, entry in sorted(index.items()):
        bench = prepare(get_pool(name).dataset, name, features_needed=False)
        key = ranking_key(bench, default_candidates(bench))
        stale = f"{name}: what ships is stale; run python scripts/rank_pools.py --ship --pools {name}"
        assert entry["key"] == key and shipped_file(key).is_file(), stale
        assert default_router(bench, rank=False).router_id == entry["default"], stale
        with recording() as keys:
            make_router(entry["default"]).fit(bench)
        assert keys == entry["fitted"], stale
        assert all((shipped_file(k, "") / "config.json").is_file() for k in keys), stale
    listed = {k for e in index.values() for k in (e["key"], *e["fitted"])} | {"index.json"}
    assert {p.name.removesuffix(".npz") for p in shipped_file("index").parent.iterdir()} == listed


def _index() -> dict:
    return json.loads(shipped_file("index", ".json").read_text(encoding="utf-8"))["pools"]


def _arrays(folder) -> dict:
    """Every tensor of a stored router's folder (and its sub-folders), by relative path and name."""
    return {
        f"{f.relative_to(folder)}:{name}": array
        for f in sorted(folder.rglob("*.safetensors"))
        for name, array in load_file(str(f)).items()
    }


def test_the_shipped_default_fit_is_what_the_default_pool_fits(real_data):
    """The default pool's default router ships fitted (``scripts/rank_pools.py --ship``), so a fresh
    clone's first view trains nothing: fitting it again here stores the same artifacts, under the
    same keys, with the same weights."""
    entry = _index()[DEFAULT_POOL]
    bench = prepare(DATASET_CHOICES[0], DEFAULT_POOL, features_needed=False)
    with recording(fresh=True) as keys:
        make_router(entry["default"]).fit(bench)
    assert keys == entry["fitted"] and keys, "stale: run python scripts/rank_pools.py --ship"
    for key in keys:
        fresh, shipped = cached_fit(key), shipped_file(key, "")
        configs = sorted(p.relative_to(fresh) for p in fresh.rglob("config.json"))
        assert configs == sorted(p.relative_to(shipped) for p in shipped.rglob("config.json"))
        for c in configs:
            assert json.loads((fresh / c).read_text()) == json.loads((shipped / c).read_text())
        got, want = _arrays(fresh), _arrays(shipped)
        assert got.keys() == want.keys() and got
        for name, array in want.items():
            np.testing.assert_allclose(got[name], array, rtol=0, atol=1e-6, err_msg=name)
