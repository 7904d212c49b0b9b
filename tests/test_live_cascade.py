"""The cascade routes your own text live: a runnable main agent (a tiny BERT saved by the tests)
answers, its confidence is read, the router decides, and an expert known only by its answers to
the dataset is named as the agent it would defer to — never run, never faked."""

from __future__ import annotations

import numpy as np
import pytest
from _pages import open_page

from l2d_core.agents import PoolSpec, get_agent
from l2d_core.agents.answering import answer_with
from l2d_core.agents.cache import AgentCache
from l2d_core.app_logic.answers import context_note
from l2d_core.app_logic.live import live_pools, main_runs_live
from l2d_core.deploy import deploy
from l2d_core.method.costs import CostConfig
from l2d_core.routers.features import answer_context
from l2d_core.routers.registry import make_router

CONTEXT = "Moby-Dick is an 1851 novel by American writer Herman Melville about the whale."


@pytest.fixture(autouse=True)
def _forget_the_pages_caches():
    """The page tests here hand the dashboard a slice benchmark and a fixed default router; what
    the pages cached from them must not reach the next test (nor the other modules' page tests)."""
    import streamlit as st

    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


def test_the_live_pool_is_offered_for_new_text(live_bench):
    assert main_runs_live(live_bench.pool) and "Tiny-live" in live_pools("squad11")
    assert not main_runs_live(PoolSpec("x", "squad11", "match-lstm", ("bert-ens",)))


def test_own_text_is_answered_live_and_routed(live_bench):
    router = make_router("l2d-cascade").fit(live_bench)

    def route(costs):
        return deploy(router, costs).route("Who wrote Moby-Dick?", CONTEXT)

    r = route(live_bench.costs(0.05))
    assert r["signals"]["main_answer"] in CONTEXT and r["signals"]["main_latency_ms"] > 0
    conf = r["signals"]["main_confidence"]
    assert 0.0 <= conf["span_prob"] <= 1.0 and conf["windows"] == 1
    # where the answer sits among the question's words: what the cascade's features read
    placed = r["signals"]["main_answer_context"]
    assert placed == answer_context(r["signals"]["main_answer"], "Who wrote Moby-Dick?", CONTEXT)
    assert set(placed) == {"question_words_near_answer", "question_words_in_answer_sentence"}
    p_err = [[w[k] for w in r["chance_wrong"].values()] for k in ("start", "end")]
    assert np.shape(p_err) == (2, 2) and ((np.array(p_err) >= 0) & (np.array(p_err) <= 1)).all()
    assert r["agent"] in ("tiny-live", "bert-ens") and r["gflops"]["router"] > 0
    # experts far too dear: the main agent keeps the query; free and reliable experts: it defers
    assert route(CostConfig((1.0,), (5.0,)))["agent"] == "tiny-live"
    free = route(CostConfig((0.0,), (0.0,)))
    assert free["agent"] == "bert-ens"
    assert free["chance_wrong"] == r["chance_wrong"]  # costs move the choice, not the estimates


def test_an_expert_that_cannot_run_is_named_never_faked(live_bench):
    out = answer_with(get_agent("bert-ens"), "Who wrote Moby-Dick?", CONTEXT, None, AgentCache())
    assert out["status"] == "cannot_answer" and out["answer"] is None


def test_single_query_page_routes_own_text_on_a_live_pool(live_bench, monkeypatch):

    import pages.ui.cache
    from l2d_core.app_logic.default_view import DefaultChoice
    from l2d_core.method.costs import CostConfig

    # the page's benchmark is the slice (the tiny model answered only its questions)
    monkeypatch.setattr(pages.ui.cache, "prepare", lambda *args, **kwargs: live_bench)
    monkeypatch.setattr(
        pages.ui.cache, "pick_default", lambda bench, **kw: DefaultChoice("l2d-cascade", 0.1, 1.0, [])
    )
    at = open_page("single_query")
    at.session_state["dataset"], at.session_state["pool"] = "squad11", "Tiny-live"
    at.session_state["costs"] = CostConfig((0.0,), (0.0,))  # a free expert: the cascade defers
    at.session_state["costs_pool"] = ("squad11", "Tiny-live")
    at.run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    assert at.radio(key="sq_source").options == ["Dataset question", "Your own text"]
    at.radio(key="sq_source").set_value("Your own text").run()
    at.text_input(key="sq_question").input("Who wrote Moby-Dick?")
    at.text_area(key="sq_context").input(CONTEXT)
    at.run()
    assert not at.exception, at.exception
    assert at.metric[0].value == "bert-ens"
    assert any("Would defer to **bert-ens**" in w.value for w in at.warning)
    # bert-ens did not run: not paid; the tile adds up only what ran (the tiny model, measured here)
    ran_here = float(at.metric[3].value)
    assert ran_here == float(at.metric[2].value.split()[0]) > 0  # GFLOPs of this query = the main agent's
    assert any("Not paid, because it could not answer this text: bert-ens" in c.value for c in at.caption)
    status = dict(zip(at.dataframe[1].value["agent"], at.dataframe[1].value["status"]))
    assert status == {"tiny-live": "ran now", "bert-ens": "cannot answer new text"}
    assert any("confidence in its answer" in c.value for c in at.caption)
    main_answer = at.dataframe[1].value["answer"].iloc[0]
    placed = answer_context(main_answer, "Who wrote Moby-Dick?", CONTEXT)
    assert context_note("tiny-live", placed) in [c.value for c in at.caption]


def test_single_query_page_two_stage_cascade_names_the_expert_it_would_ask(live_bench, monkeypatch):
    """Own text through l2d-staged: where it doubts the main answer it would ask bert-ens, which
    cannot answer new text; the page says so (and shows the doubt and the threshold)."""

    import numpy as np

    import pages.ui.cache
    from l2d_core.app_logic.default_view import DefaultChoice
    from l2d_core.routers.staged import StagedRouter

    monkeypatch.setattr(pages.ui.cache, "prepare", lambda *args, **kwargs: live_bench)
    monkeypatch.setattr(
        pages.ui.cache, "pick_default", lambda bench, **kw: DefaultChoice("l2d-staged", 0.1, 1.0, [])
    )
    monkeypatch.setattr(StagedRouter, "threshold", lambda self, costs: -np.inf)  # it always doubts
    at = open_page("single_query")
    at.session_state["dataset"], at.session_state["pool"] = "squad11", "Tiny-live"
    at.run()
    assert at.selectbox(key="sq_router").value == "l2d-staged"
    at.radio(key="sq_source").set_value("Your own text").run()
    at.text_input(key="sq_question").input("Who wrote Moby-Dick?")
    at.text_area(key="sq_context").input(CONTEXT)
    at.run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    assert at.metric[0].value == "bert-ens"
    assert any("would ask bert-ens" in w.value and "prediction file" in w.value for w in at.warning)
    assert any("so it would ask bert-ens." in c.value for c in at.caption)  # it cannot: no "asked"
