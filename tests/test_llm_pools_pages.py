"""The LLM pools and modern agents of BENCHMARK.md ("LLM pools and modern systems") on the pages,
in scripts/precompute_cache.py and in scripts/benchmark_routers.py: router menus offer only what
runs on the pool, agents known by their outcome log show "right"/"wrong", the overview says what
each agent is, the latency price rule and the realised latency tile, outcome logs read in by the
precompute script, embeddings computed only for routers that read them, P3-albert's measured
costs, and P2/P3's post-hoc helpers unchanged by the new agents.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from _pages import open_page
from streamlit.testing.v1 import AppTest

from l2d_core.agents import get_agent, get_pool
from l2d_core.agents.catalog import cheap_builtin_agents
from l2d_core.agents.measured import agent_gflops, architecture_gflops
from l2d_core.app_logic.answers import f1_note, shown_answer, textless_agents
from l2d_core.data import load_dataset
from l2d_core.evaluation.benchmark import prepare
from l2d_core.evaluation.validation import LATENCY_GRID
from l2d_core.method.costs import realised_latency
from l2d_core.routers.posthoc_inputs import posthoc_helpers
from l2d_core.routers.registry import make_router, router_label

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
LLM_POOLS = ("PLLM", "PLLM-abstain", "Pllama")
MODERN = ("albert-base", "electra-base", "deberta-v3-base", "bert-base", "qanet")
CONF = router_label("conf-threshold")


def run(name: str, pool: str, dataset: str = "squad20", **state) -> AppTest:
    at = open_page(name, pool)
    at.session_state["dataset"] = dataset
    for k, v in state.items():
        at.session_state[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def rule_radio(at: AppTest):
    return next(r for r in at.radio if r.label == "β from")


def test_router_menus_offer_conf_threshold_only_where_the_main_agent_gives_confidence():
    on_llm = run("decisions", "PLLM")
    assert CONF in on_llm.selectbox(key="dec_router").options
    on_p2 = run("decisions", "P2", dataset="squad11")
    assert CONF not in on_p2.selectbox(key="dec_router").options
    assert router_label("l2d-posthoc") in on_p2.selectbox(key="dec_router").options
    single = run("single_query", "P2", dataset="squad11")
    assert CONF not in single.selectbox(key="sq_router").options


def test_pool_menu_lists_the_llm_pools_with_what_each_is():
    at = run("overview", "PLLM-abstain")
    menu = at.selectbox(key="pool")
    shown = " ".join(menu.options)
    for name in LLM_POOLS:
        assert f"{name}: {' → '.join(get_pool(name).agent_ids)}" in shown
        assert f"**{name}**" in menu.help and get_pool(name).description in menu.help
    assert any(c.value == f"PLLM-abstain: {get_pool('PLLM-abstain').description}." for c in at.caption)


def test_overview_says_what_each_agent_is_and_how_its_cost_is_known():
    at = run("overview", "PLLM-abstain")
    table = at.dataframe[0].value.set_index("agent")
    assert table.loc["bert-tiny", "kind"] == "outcome log"
    assert table.loc["abstain", "kind"] == "abstains"
    assert table.loc["bert-tiny", "cost"] == "measured GFLOPs; latency logged"
    assert table.loc["gpt3-davinci", "cost"] == "declared GFLOPs; latency logged"
    assert set(table["new text"]) == {"no"}
    # a log without answer text: its F1 is its EM, and the page says so
    assert table.loc["gpt3-davinci", "f1"] == pytest.approx(table.loc["gpt3-davinci", "em"])
    assert any(c.value == f1_note(["bert-tiny", "gpt3-davinci"]) for c in at.caption)
    llama = run("overview", "Pllama").dataframe[0].value.set_index("agent")
    assert llama.loc["llama-3.2-3b", "cost"] == "declared GFLOPs; no latency logged"
    assert llama.loc["v2-nullodds", "kind"] == "prediction file"


def test_p3_albert_costs_are_measured_from_the_configuration():
    spec = get_agent("albert-base")
    measured = architecture_gflops(spec.options["architecture"])
    assert spec.gflops_source == "measured" and measured > 5.0
    table = run("overview", "P3-albert", dataset="squad11").dataframe[0].value.set_index("agent")
    assert table.loc["albert-base", "gflops"] == pytest.approx(measured)
    assert table.loc["albert-base", "cost"] == "measured GFLOPs; no latency logged"
    assert table.loc["match-lstm", "cost"] == "declared GFLOPs; no latency logged"
    bench = prepare("squad11", "P3-albert", features_needed=False)
    assert bench.train.agent_gflops[1] == pytest.approx(measured)


def test_a_measured_architecture_counts_as_the_model_with_random_weights_does():
    """The count is built without drawing weights: it equals the count of the same model drawn at
    random (BENCHMARK.md's rule), here for a one-layer BERT and DeBERTa-v3's attention."""
    import torch

    from l2d_core.flops import forward_gflops
    from l2d_core.runtime import transformers_names

    auto_config, auto_qa = transformers_names("AutoConfig", "AutoModelForQuestionAnswering")
    small = {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64}
    deberta = {**get_agent("deberta-v3-base").options["architecture"], **small, "vocab_size": 1000}
    for arch in ({"model_type": "bert", **small}, deberta):
        config = auto_config.for_model(
            arch["model_type"], **{k: v for k, v in arch.items() if k != "model_type"}
        )
        config._attn_implementation = "eager"
        torch.manual_seed(0)
        drawn = forward_gflops(auto_qa.from_config(config).eval(), 64)
        assert architecture_gflops(arch, tokens=64) == pytest.approx(drawn, rel=1e-12) and drawn > 0


def test_measured_agents_cost_their_measured_gflops_on_single_query_and_the_api(monkeypatch, request):
    """An agent measured from its architecture says 0 GFLOPs in its spec (and beside its imported
    answers): Single query's table and tiles, and the routing API, charge its measured figure, as
    the benchmark does."""
    import pages.ui.cache
    from l2d_core.app_logic.default_view import DefaultChoice
    from l2d_core.deploy import deploy
    from l2d_core.routers.staged import StagedRouter

    # a fixed default router: the pages' validation ranking is not what this checks (tens of
    # seconds); the pages' cached defaults are cleared before and after, so no other test sees it
    fixed = {"P3-albert": "l2d-cascade", "PLLM": "conf-threshold"}
    monkeypatch.setattr(
        pages.ui.cache, "pick_default", lambda bench, **kw: DefaultChoice(fixed[bench.pool.name], 0.1, 1, [])
    )
    pages.ui.cache.default_router.clear()
    request.addfinalizer(pages.ui.cache.default_router.clear)
    albert, tiny = (agent_gflops(get_agent(a)) for a in ("albert-base", "bert-tiny"))
    table = run("single_query", "P3-albert", dataset="squad11").dataframe[-1].value.set_index("agent")
    assert float(table.loc["albert-base", "GFLOPs"]) == pytest.approx(albert, rel=0.01)
    at = run("single_query", "PLLM")
    table = at.dataframe[-1].value.set_index("agent")
    assert float(table.loc["bert-tiny", "GFLOPs"]) == pytest.approx(tiny, rel=0.01)
    assert float(at.metric[2].value) == pytest.approx(tiny, rel=0.01)  # the main agent's GFLOPs tile
    # a two-stage cascade that always asks ALBERT pays its measured GFLOPs for the second opinion
    bench = prepare("squad11", "P3-albert", features_needed=False)
    monkeypatch.setattr(StagedRouter, "threshold", lambda self, costs: -np.inf)
    rec = bench.test_records[0]
    router = make_router("l2d-staged").fit(bench)
    r = deploy(router, bench.costs(0.5)).route(rec.question, rec.context, rec.qid)
    assert r["signals"]["asked"]["asked"] and r["gflops"]["asked"] == pytest.approx(albert)


def test_decisions_page_shows_right_or_wrong_for_logged_agents():
    at = run("decisions", "PLLM-abstain")
    bench = prepare("squad20", "PLLM-abstain", features_needed=False)
    df = at.dataframe[0].value
    em = dict(zip(bench.test.qids, bench.test.em[:, 1]))
    shown = df["answer gpt3-davinci"]
    assert set(shown) == {"right", "wrong"}
    assert all((s == "right") == bool(em[q]) for q, s in zip(df["qid"], shown))
    assert set(df["answer abstain"]) == {"(no answer)"}
    assert any(c.value == f1_note(["bert-tiny", "gpt3-davinci"]) for c in at.caption)


def test_single_query_answers_a_dataset_question_of_a_logged_agent_as_right_or_wrong():
    at = run("single_query", "PLLM")
    table = at.dataframe[-1].value.set_index("agent")
    bench = prepare("squad20", "PLLM", features_needed=False)
    i = at.selectbox(key="sq_index").value
    for j, a in enumerate(bench.test.agent_ids):
        assert table.loc[a, "answer"] == ("right" if bench.test.em[i, j] else "wrong")
        assert "F1 follows EM" in table.loc[a, "note"]
    assert any("F1 follows EM" in c.value for c in at.caption)


def test_cost_explorer_offers_the_latency_price_and_shows_the_realised_latency():
    rid, lam = "conf-threshold", 0.5
    at = run("cost_explorer", "PLLM", routers=[rid], cost_rule="latency", latency_price=lam)
    rules = rule_radio(at)
    assert "a price per second of latency" in rules.options
    tile = next(m.value for m in at.metric if m.label == "Latency/query")
    bench = prepare("squad20", "PLLM", features_needed=False)
    d = make_router(rid).fit(bench).decide(bench.latency_costs(lam))
    assert float(re.match(r"[\d.]+", tile).group()) == pytest.approx(
        realised_latency(bench.test.latency, d.choice).mean(), abs=5e-4
    )
    # a pool without logged latency neither offers the rule nor shows the tile
    p2 = run("cost_explorer", "P2v2", cost_rule="latency")
    assert "a price per second of latency" not in rule_radio(p2).options
    assert rule_radio(p2).value == "price"
    assert "Latency/query" not in [m.label for m in p2.metric]


def test_answers_in_words():
    assert shown_answer(None, 1.0) == "right" and shown_answer(None, 0.0) == "wrong"
    answers = np.array([[None, "x", ""], [None, None, ""]], dtype=object)
    assert textless_agents(("a", "b", "c"), answers) == ["a"]
    assert "its F1 follows EM" in f1_note(["a"])


def test_post_hoc_helpers_are_unchanged_by_the_modern_agents():
    leaderboard = ("logreg", "dcr", "span-clf", "rasor", "rnet", "coattn")
    assert posthoc_helpers("squad11", "match-lstm") == leaderboard
    assert not set(MODERN) & set(posthoc_helpers("squad11", "logreg"))
    assert not set(MODERN) & set(cheap_builtin_agents("squad11", "logreg", max_gflops=1e9))
    assert get_agent("qanet").gflops <= 5.0  # cheap enough, yet not a default helper


def test_precompute_reads_outcome_logs_in_and_makes_the_abstaining_agent(tmp_path, capsys):
    import json

    import precompute_cache

    log = tmp_path / "log.csv"
    qids = [r.qid for r in load_dataset("squad20").records[:3]]  # what --limit 3 runs
    log.write_text("id,correct,latency\n" + "".join(f"{q},{k % 2},0.{k + 1}\n" for k, q in enumerate(qids)))
    cfg = tmp_path / "agents.json"
    agents = [{"id": "my-log", "kind": "outcome_log", "path": str(log), "gflops": 3}, "abstain"]
    cfg.write_text(json.dumps({"dataset": "squad20", "agents": agents}))
    assert precompute_cache.main(["--config", str(cfg), "--limit", "3", "--json", "--quiet"]) == 0
    rows = {r["agent"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["my-log"]["computed"] == 3 and rows["my-log"]["em"] == pytest.approx(100 / 3, abs=0.01)
    assert rows["my-log"]["latency_ms"] == pytest.approx(200.0)
    assert get_agent("my-log").kind == "outcome_log"
    assert rows["abstain"]["questions"] == 3 and rows["abstain"]["gflops_384"] == 0.0
    cfg.write_text(
        json.dumps({"dataset": "squad20", "agents": [{"id": "x", "kind": "outcome_log", "path": "/no"}]})
    )
    assert precompute_cache.main(["--config", str(cfg)]) == 2
    assert "outcome log" in capsys.readouterr().err


def test_benchmark_computes_embeddings_only_for_routers_that_read_them(tmp_path, monkeypatch, capsys):
    import benchmark_routers as B

    assert not B.reads_embeddings(["l2d-posthoc", "zero", "agent:match-lstm"])
    assert B.reads_embeddings(["l2d-plugin"]) and B.reads_embeddings(None)
    seen = {}

    def spy(*args, **kw):
        seen.update(kw)
        return prepare(*args, **kw)

    monkeypatch.setattr(B, "prepare", spy)
    code = B.main(["--pool", "P2", "--routers", "conf-threshold", "--out", str(tmp_path), "--quiet"])
    assert code == 2 and seen["features_needed"] is False
    assert "main agent's own confidence" in capsys.readouterr().err


def test_the_price_slider_spans_the_prices_that_change_a_decision():
    """On PLLM the expert costs 150 TFLOPs more than the main agent: beyond λ ≈ 0.013 errors per
    TFLOP its every answer is dearer than two mistakes, and the decisions change over four
    decades below that, so the slider steps evenly in log from 0 to there; a λ left over from P2
    is brought onto it. PLLM logs latency, so the page starts on the latency price, at the default
    λₛ the sidebar names (a stop of the validation grid), unless the user chose another rule. On
    P2 the slider is as before (0 to 2, step 0.01)."""
    at = run("cost_explorer", "PLLM", cost_rule="price", price=0.5, _price_default=(-1.0, "latency"))
    assert at.radio(key="cost_rule").value == "price"  # the user's own rule is kept
    slider = at.select_slider(key="price")
    bench = prepare("squad20", "PLLM", features_needed=False)
    stops = [float(v) for v in slider.options]
    assert stops == list(bench.log_prices) and stops[0] == 0.0 and len(stops) > 20
    assert all(1.3 <= b / a <= 1.7 for a, b in zip(stops[1:], stops[2:]))  # even steps in log
    assert 2.0 <= bench.price_costs(stops[-1]).beta[0] <= 3.1  # the end: β just past two mistakes
    assert bench.price_costs(stops[-2]).beta[0] < 2.0
    assert float(slider.value) == stops[-1]  # the leftover 0.5 brought to the nearest stop
    fresh = run("cost_explorer", "PLLM")
    default, rule = fresh.session_state["_price_default"]
    assert rule == "latency" and fresh.radio(key="cost_rule").value == "latency" and default in LATENCY_GRID
    assert float(fresh.slider(key="latency_price").value) == default
    assert f"λₛ = {default:g} errors per second" in " ".join(c.value for c in fresh.sidebar.caption)
    assert float(fresh.session_state["price"]) in stops  # λ's slider, if chosen, starts on its scale
    p2 = run("cost_explorer", "P2", dataset="squad11")
    assert (p2.slider(key="price").max, p2.slider(key="price").step) == (2.0, 0.01)
    assert not p2.select_slider


def test_after_a_pool_switch_the_slider_shows_the_default_price_the_sidebar_names():
    """A newcomer opens the cost explorer on P2 (per-TFLOP price), then picks Plocal (latency
    price) and goes back: each time the slider stands at the price the sidebar's default names,
    because a price the page wrote itself (a starting value, another pool's default) is not the
    user's own. A price the user moved, and a rule the user picked, are kept across the switch."""
    at = run("cost_explorer", "P2", dataset="squad11")
    seen = {}
    for pool, key in (("P2", "price"), ("Plocal", "latency_price"), ("P2", "price")):
        if at.selectbox(key="pool").value != pool:
            at.selectbox(key="pool").set_value(pool)
            at.run()
        assert not at.exception, [e.value for e in at.exception]
        default, rule = at.session_state["_price_default"]
        assert rule == {"price": "price", "latency_price": "latency"}[key]
        assert at.radio(key="cost_rule").value == rule
        assert float(at.slider(key=key).value) == default
        unit = "errors per second" if rule == "latency" else "errors per TFLOP"
        assert f"= {default:g} {unit}" in " ".join(c.value for c in at.sidebar.caption)
        seen[pool] = default
    # the check above means something only where the default differs from the slider's start
    assert seen["Plocal"] != 0.1, "Plocal's default λₛ is the slider's start: pick another pool here"
    mine = 0.37 if seen["Plocal"] != 0.37 else 0.41
    at.selectbox(key="pool").set_value("Plocal")
    at.run()
    at.slider(key="latency_price").set_value(mine)
    at.run()
    at.selectbox(key="pool").set_value("P2")
    at.run()
    at.selectbox(key="pool").set_value("Plocal")
    at.run()
    assert not at.exception and float(at.slider(key="latency_price").value) == mine
    at.radio(key="cost_rule").set_value("gflops")  # a rule the user picks is kept the same way
    at.run()
    at.selectbox(key="pool").set_value("P2")
    at.run()
    assert not at.exception and at.radio(key="cost_rule").value == "gflops"


def test_where_no_router_pays_the_default_is_the_most_accurate_agent():
    """Pllama: Llama-3.2-3B costs more than the v2.0 reader and is less accurate, so no router
    beats random mixing of agents on validation articles. A default that loses to mixing would be
    a bug: every question goes to the most accurate agent (which mixing cannot beat), and the
    sidebar says which router fell short and by how much."""
    from l2d_core.app_logic.default_view import default_router

    bench = prepare("squad20", "Pllama", features_needed=False)
    choice = default_router(bench)
    assert choice.router_id == "agent:v2-nullodds" and choice.gain == pytest.approx(0.0)
    assert choice.instead_of == choice.ranking[0] and not choice.instead_of.pays("price")
    assert math.isfinite(choice.instead_of.low("price")) and choice.instead_of.low("price") <= 0
    at = run("cost_explorer", "Pllama")
    assert at.multiselect(key="routers").value == ["agent:v2-nullodds"]
    said = " ".join(c.value for c in at.sidebar.caption)
    lost = f"{router_label(choice.instead_of.router_id)}, is {choice.instead_of.gain:+.2f}"
    assert f"No router pays for itself on this pool: the best, {lost}" in said
    assert "Default: every question to v2-nullodds" in said
    tile = next(m.value for m in at.metric if m.label == "EM vs random mixing")
    assert float(tile) >= 0.0  # on the test articles too: the reader tops the agents' hull
    said = [i.value for i in run("decisions", "Pllama").info]
    assert "Every question goes to v2-nullodds: a single agent, no routing." in said
    single = " ".join(c.value for c in run("single_query", "Pllama").main.caption)
    assert "No router pays for itself on Pllama" in single and "every question to v2-nullodds" in single
    # where a router pays, it stays the default
    p2 = default_router(prepare("squad11", "P2", features_needed=False))
    assert p2.instead_of is None and not p2.router_id.startswith("agent:") and p2.ranking[0].pays("price")
    assert 0 < p2.ranking[0].gain_low < p2.gain
