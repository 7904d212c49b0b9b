"""Every router of the one registry, on a small real slice: the interface every surface relies on
(fit → decide at a cost setting → curve points), and the registry's own rules."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from _slices import slice_bench

from l2d_core.evaluation.benchmark import prepare
from l2d_core.evaluation.points import router_points
from l2d_core.routers import registry
from l2d_core.routers.base import Router
from l2d_core.routers.decision import Decision
from l2d_core.routers.registry import (
    AGENT_PREFIX,
    make_router,
    register,
    router_class,
    router_ids,
    router_label,
)


@pytest.fixture(scope="module")
def p3(real_data):
    return slice_bench("P3")


def runs_on(rid, p3):
    """P3's slice; for a router that cannot run there (it says why, and fitting raises that) the
    PLLM pool, whose main agent gives its confidence."""
    cls = router_class(rid)
    reason = cls.unavailable(p3) if cls is not None else None
    if reason is None:
        return p3
    with pytest.raises(ValueError, match="P3"):
        make_router(rid).fit(p3)
    return prepare("squad20", "PLLM", features_needed=False)


@pytest.mark.parametrize("rid", router_ids())
def test_every_router_fits_decides_and_draws(p3, rid):
    router = make_router(rid)
    assert not [k for k in vars(router) if k.endswith("_")]  # learned state only after fit
    p3 = runs_on(rid, p3)
    assert router.fit(p3, seed=0) is router and router.id == rid
    n, a = len(p3.test), p3.test.n_agents
    for costs in (p3.costs(0.0), p3.price_costs(0.5)):
        d = router.decide(costs)
        assert isinstance(d, Decision) and d.choice.shape == (n,)
        assert d.choice.min() >= 0 and d.choice.max() < a and d.overhead_gflops >= 0
        if d.expected is not None:
            assert d.expected.shape == (n, a)
    points = router_points(router, betas=(0.0, 0.5), prices=(0.1,))
    assert points and all({"em", "gflops", "share_strong"} <= set(p) for p in points)
    assert all(0 <= p["em"] <= 100 for p in points)
    assert router_label(rid) and router_label(rid) != rid or rid.startswith(AGENT_PREFIX)


def test_agents_come_with_every_pool_and_short_ids_resolve(p3):
    ids = router_ids(p3)
    assert [i for i in ids if i.startswith(AGENT_PREFIX)] == [AGENT_PREFIX + a for a in p3.test.agent_ids]
    assert make_router("sdl").id == "l2d-sdl" and make_router("cascade").id == "l2d-cascade"
    one = make_router("agent:bert-ens").fit(p3)
    assert (one.decide(p3.costs(0.1)).choice == p3.test.agent_ids.index("bert-ens")).all()
    assert (
        router_class("agent:bert-ens") is None and router_class("plugin") is registry.routers()["l2d-plugin"]
    )
    with pytest.raises(KeyError, match="unknown router"):
        make_router("no-such-router")


def test_adding_a_router_is_one_registration(p3):
    class Cheapest(Router):
        id = "test-cheapest"
        label = "always the main agent"

        def decide(self, costs):
            return Decision(np.zeros(len(self.bench_.test), dtype=int))

    try:
        register(Cheapest)
        assert "test-cheapest" in router_ids() and router_label("test-cheapest") == "always the main agent"
        pts = router_points(make_router("test-cheapest").fit(p3), betas=(0.0,))
        assert pts[0]["share_strong"] == 0.0
        register(Cheapest)  # the same class again (a module imported twice): nothing changes

        class Other(Cheapest):
            label = "another router under the same id"

        with pytest.raises(ValueError, match="already registered"):
            register(Other)
    finally:
        registry._ROUTERS.pop("test-cheapest", None)


def test_a_router_is_made_importing_its_own_module_alone_and_the_menus_keep_their_order(tmp_path):
    """With the index on disk current, ``make_router`` imports the module of the router asked for
    alone (a command that runs the post-hoc router imported every router and torch: seconds);
    every router listed afterwards still comes in the modules' order."""
    import subprocess
    import sys

    code = (
        "import sys, json\n"
        "from l2d_core.routers import registry\n"
        "registry.router_ids()\n"
        "before = set(sys.modules)\n"
        "registry.make_router('posthoc')\n"
        "new = sorted(m for m in set(sys.modules) - before if m.startswith('l2d_core.routers.'))\n"
        "torch = 'torch' in sys.modules\n"
        "print(json.dumps([new, torch, list(registry.routers())]))\n"
    )
    env = {**os.environ, "L2D_CACHE_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", "from l2d_core.routers.registry import router_ids; router_ids()"],
                   env=env, check=True, timeout=120)  # fmt: skip
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    new, torch, order = json.loads(run.stdout.strip().splitlines()[-1])
    assert "l2d_core.routers.posthoc" in new
    assert not {"l2d_core.routers.sdl", "l2d_core.routers.quality", "l2d_core.routers.hybrid"} & set(new)
    assert torch is False
    assert order == list(registry.routers())
