"""Issue 37, item 2: a router with nothing to add on a pool is not offered there. The post-hoc
router reads the main answer and cheap helper agents; on a pool with no helper it would read what
the cascade reads, so it is left out of the menus, the benchmark and the validation ranking, and
naming it gives one line that says so (computed from the pool's helpers, not from router ids).
The two-stage cascade compares the main answer with the cheapest expert's: where that expert gives
no text, or one answer to all (``abstain``), it is the cascade too."""

from __future__ import annotations

import pytest
from benchmark_routers import UsageError, check_available

from l2d_core.evaluation.benchmark import prepare
from l2d_core.evaluation.validation import candidates
from l2d_core.routers.posthoc_inputs import posthoc_helpers
from l2d_core.routers.registry import make_router, router_class, router_ids


@pytest.fixture(scope="module")
def pllm(real_data):
    return prepare("squad20", "PLLM", features_needed=False)


def test_posthoc_is_not_offered_where_no_helper_answers(pllm):
    assert posthoc_helpers("squad20", "bert-tiny") == ()
    why = router_class("l2d-posthoc").unavailable(pllm)
    assert why is not None and "same as l2d-cascade" in why and "\n" not in why
    assert "l2d-posthoc" not in router_ids(pllm) and "l2d-cascade" in router_ids(pllm)
    assert "l2d-posthoc" not in candidates(pllm) and "l2d-cascade" in candidates(pllm)
    with pytest.raises(UsageError, match="same as l2d-cascade"):
        check_available(pllm, ["l2d-posthoc", "l2d-cascade"])
    with pytest.raises(ValueError, match="same as l2d-cascade"):
        make_router("l2d-posthoc").fit(pllm)


def test_posthoc_is_offered_where_helpers_answer(real_data):
    p2 = prepare("squad11", "P2", features_needed=False)
    assert posthoc_helpers("squad11", "match-lstm")
    assert router_class("l2d-posthoc").unavailable(p2) is None and "l2d-posthoc" in router_ids(p2)


def test_a_two_stage_cascade_still_runs_where_posthoc_is_not_offered(real_data):
    """The two-stage cascade's stages are post-hoc routers with their helpers given: not refused
    on P3v2 (no cheap helper for bidaf-elmo, but its cheapest expert answers with text)."""
    p3v2 = prepare("squad20", "P3v2", features_needed=False)
    assert "l2d-posthoc" not in router_ids(p3v2) and "l2d-staged" in router_ids(p3v2)
    staged = make_router("l2d-staged").fit(p3v2, seed=0)
    assert staged.decide(p3v2.costs(0.5)).choice.shape == (len(p3v2.test),)


@pytest.mark.parametrize(
    ("pool", "asked", "gives"),
    [("PLLM", "gpt3-davinci", "no answer text"), ("PLLM-abstain", "abstain", "the same answer")],
)
def test_staged_is_not_offered_where_the_expert_it_asks_first_gives_nothing_to_compare(
    real_data, pool, asked, gives
):
    bench = prepare("squad20", pool, features_needed=False)
    why = router_class("l2d-staged").unavailable(bench)
    assert why is not None and f"{asked}, gives {gives}" in why and "same as l2d-cascade" in why
    assert "l2d-staged" not in router_ids(bench) and "l2d-staged" not in candidates(bench)
