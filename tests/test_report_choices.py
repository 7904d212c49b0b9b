"""Issue 37, item 10: every choice a report makes — the L2D router it reads, its operating point,
the PGR metrics' strong reference agent — is made on the training articles and applied once to
test. Proof: the test articles' labels are swapped between the main agent and the expert (so
every test EM moves, and the agent of best test EM changes) and every choice stays where it was."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from l2d_core.evaluation.benchmark import prepare
from l2d_core.evaluation.comparison import ComparisonPlan, run_comparison
from l2d_core.report import evaluate_targets
from l2d_core.report.target_common import chosen_point, chosen_router

ROUTERS = ("l2d-cascade", "conf-threshold", "zero")
TARGETS = [
    {"id": "vs", "type": "apgr_vs", "pool": "PLLM", "router": "conf-threshold"},
    {
        "id": "share",
        "type": "em_at_share",
        "pool": "PLLM",
        "agent": "gpt3-davinci",
        "max_share": 0.1,
        "min_em": 0,
    },
]


def _swapped_labels(bench):
    """``bench`` with the main agent's and the first expert's test labels exchanged."""
    t = bench.test
    cols = np.arange(t.n_agents)
    cols[[0, 1]] = cols[[1, 0]]
    test = replace(
        t, start_ok=t.start_ok[:, cols], end_ok=t.end_ok[:, cols], em=t.em[:, cols], f1=t.f1[:, cols]
    )
    return replace(bench, test=test)


@pytest.fixture(scope="module")
def both(real_data):
    bench = prepare("squad20", "PLLM", features_needed=False)
    plan = ComparisonPlan(seeds=(0,), routers=ROUTERS, n_boot=0, budgets=())
    return run_comparison(bench, plan), run_comparison(_swapped_labels(bench), plan)


def test_the_swap_moves_the_test_figures(both):
    a, b = both
    assert a["agent_em"] != b["agent_em"]
    assert max(a["agent_em"], key=a["agent_em"].get) != max(b["agent_em"], key=b["agent_em"].get)
    assert [p["em"] for p in a["routers"]["l2d-cascade"]["points"]] != [
        p["em"] for p in b["routers"]["l2d-cascade"]["points"]
    ]


def test_no_choice_moves_with_the_test_labels(both):
    a, b = both
    assert a["pgr_strong"] == b["pgr_strong"] == "gpt3-davinci"  # best on the training articles
    assert a["routers"]["l2d-cascade"]["validation"] == b["routers"]["l2d-cascade"]["validation"]
    assert chosen_router(a) == chosen_router(b) == "l2d-cascade"
    assert chosen_point(a, "l2d-cascade")[0] == chosen_point(b, "l2d-cascade")[0]
    ta, tb = ({t["id"]: t for t in evaluate_targets(r, targets=TARGETS)} for r in (a, b))
    assert ta["vs"]["router"] == "l2d-cascade"  # swapped: main above the expert on test, APGR undefined
    assert tb["vs"].get("router", "l2d-cascade") == "l2d-cascade"
    assert ta["share"]["router"] == tb["share"]["router"] and ta["share"]["point"] == tb["share"]["point"]
    assert ta["share"]["value"] != tb["share"]["value"]  # the same point, read on other labels
