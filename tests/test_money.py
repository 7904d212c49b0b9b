"""The money cost rule: an answer's price in dollars (a log's price column, token counts times the
agent's prices per million tokens, or one price per answer), β from each expert's extra mean price
(λ$ errors per dollar), and dollars per 1,000 questions paid — on the command line, in the
evaluation and on the cost explorer."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from test_outcome_logs import spec, tiny_dataset  # the same tiny dataset and logged agent

from l2d_core.agents import get_pool
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.outcome_log import import_log, read_outcome_log
from l2d_core.agents.prices import TokenPrices, dollars, flat_usd
from l2d_core.data import DataFormatError, load_dataset
from l2d_core.method.costs import CostConfig, InvalidCostError, beta_from_money, money_scale, realised_latency


def test_a_log_prices_each_answer_by_its_cost_column_or_its_tokens(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("id,correct,cost_usd\nq1,True,0.002\nq2,False,0.0005\n")
    cache = AgentCache(tmp_path / "agents")
    report = import_log(spec(log), tiny_dataset(), cache)
    assert cache.table("tiny", "logged")["usd"].to_dict() == {"q1": 0.002, "q2": 0.0005}
    assert report.has_usd and "price in dollars" in report.lines()[2]
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("id,correct,prompt_tokens,completion_tokens\nq1,1,1200,10\nq2,0,800,0\n")
    rows, _ = read_outcome_log(spec(tokens, usd_per_1m_input=0.5, usd_per_1m_output=1.5), tiny_dataset())
    assert rows["q1"]["usd"] == pytest.approx(0.000615) and rows["q2"]["usd"] == pytest.approx(0.0004)
    rows, _ = read_outcome_log(spec(tokens), tiny_dataset())  # token counts and no prices: no price
    assert "usd" not in rows["q1"]


@pytest.mark.parametrize(
    "text, options, says",
    [
        ("id,correct,cost_usd\nq1,1,-0.1\n", {}, r"row 1, column cost_usd must be a finite number >= 0"),
        ("id,correct,cost_usd\nq1,1,5000\n", {}, r"<= 1000 \(dollars for one answer\)"),
        ("id,correct,tokens_in\nq1,1,10\n", {"usd_per_1m_input": 1.0}, "usd_per_1m_input is given without"),
        ("id,correct,tokens_in\nq1,1,10\n", {"usd_per_1m_input": -1, "usd_per_1m_output": 1}, ">= 0, got -1"),
        (
            "id,correct,tokens_in\nq1,1,ten\n",
            {"usd_per_1m_input": 1, "usd_per_1m_output": 1},
            "column tokens_in",
        ),
    ],
)
def test_a_bad_price_is_one_line_and_nothing_is_read_in(tmp_path, text, options, says):
    log = tmp_path / "log.csv"
    log.write_text(text)
    cache = AgentCache(tmp_path / "agents")
    with pytest.raises(DataFormatError, match=says) as err:
        import_log(spec(log, **options), tiny_dataset(), cache)
    assert "\n" not in str(err.value) and cache.table("tiny", "logged").empty


def test_beta_follows_the_extra_mean_price_and_the_scale_spans_the_decisions():
    assert beta_from_money(100.0, 0.001, [0.004, 0.0005]).round(6).tolist() == [0.3, 0.0]
    assert CostConfig.from_money(100.0, 0.001, [0.004], alpha=2.0) == CostConfig((2.0,), (0.3,))
    with pytest.raises(InvalidCostError, match="money rule needs every agent's mean price per question"):
        beta_from_money(1.0, 0.0, [float("nan")])
    with pytest.raises(InvalidCostError, match="lambda_usd"):
        beta_from_money(-1.0, 0.0, [0.1])
    scale = money_scale([0.003, 0.0001])
    # from a price at which no expert is worth a thousandth of a mistake to the first at which the
    # cheapest costs two mistakes (an answer end each): every decision lies between
    assert scale[0] == 0.0 and scale[-1] * 0.0001 >= 2.0 and scale[1] * 0.003 < 0.01
    assert list(scale) == sorted(scale) and money_scale([0.0]) is None
    t = np.array([[0.001, 0.004], [0.002, 0.006]])
    assert realised_latency(t, np.array([0, 1])).tolist() == [0.001, 0.008]  # the main's always paid
    assert TokenPrices.of({"usd_per_1m_input": 0, "usd_per_1m_output": 0}).usd(10**6, 10**6) == 0.0
    with pytest.raises(DataFormatError, match="usd_per_question must be dollars from 0"):
        flat_usd({"usd_per_question": float("nan")}, "agent x")


def _write_logs(tmp_path, qids) -> dict[str, object]:
    """Two logged agents on ``qids`` with their confidence: a cheap one priced per answer (on the
    command line) and a dear one by its tokens."""
    n = len(qids)
    cheap, dear = tmp_path / "cheap.csv", tmp_path / "dear.csv"
    right = np.array([i % 3 != 0 for i in range(n)])
    conf = np.where(right, 0.6, 0.4) + 0.3 * np.sin(np.arange(n))  # informative, not perfect
    pd.DataFrame({"qid": qids, "correct": right, "confidence": conf}).to_csv(cheap, index=False)
    tokens = [400 + 7 * (i % 50) for i in range(n)]
    table = {"qid": qids, "correct": [i % 5 != 0 for i in range(n)], "confidence": 0.5}
    pd.DataFrame({**table, "tokens_in": tokens, "tokens_out": 12}).to_csv(dear, index=False)
    return {"cheap": cheap, "dear": dear, "tokens": np.array(tokens)}


def _import_priced_pool(tmp_path, qids, cheap_usd: str) -> dict[str, object]:
    """The two logs imported with their prices, as pool ``Priced`` (main: the cheap one)."""
    import import_log as cli

    logs = _write_logs(tmp_path, qids)
    base = ["--dataset", "squad20", "--gflops", "1"]
    assert (
        cli.main(["--file", str(logs["cheap"]), "--agent", "cheap", *base, "--usd-per-question", cheap_usd])
        == 0
    )
    dear = ["--file", str(logs["dear"]), "--agent", "dear", *base, "--pool", "Priced", "--main", "cheap"]
    assert cli.main([*dear, "--usd-per-1m-input", "20", "--usd-per-1m-output", "40"]) == 0
    return logs


def test_a_priced_pool_routes_by_money_on_every_surface(real_data, fresh_cache, tmp_path, capsys):
    """Two logs on the real SQuAD v2.0 questions of the benchmark split, imported with their
    prices: the pool's β follows each agent's mean price on the training articles, the evaluation
    says the dollars paid per 1,000 questions — the main agent's on every question, the expert's
    where it was called — and the command line and the cost explorer offer the money rule."""
    import evaluate

    from l2d_core.data import BENCHMARK_TEST_ARTICLES
    from l2d_core.evaluation.benchmark import prepare
    from l2d_core.evaluation.comparison import evaluate_router
    from l2d_core.routers.registry import make_router

    ds = load_dataset("squad20")
    titles = list(dict.fromkeys(r.title for r in ds))
    train = [t for t in titles if t not in BENCHMARK_TEST_ARTICLES][:3]
    keep = train + [t for t in titles if t in BENCHMARK_TEST_ARTICLES][:2]
    qids = [r.qid for r in ds if r.title in keep]
    logs = _import_priced_pool(tmp_path, qids, "0.00002")
    assert "price in dollars" in capsys.readouterr().out

    bench = prepare("squad20", "Priced", features_needed=False)
    assert bench.has_money and get_pool("Priced").experts == ("dear",)
    usd = bench.train.usd.mean(axis=0)
    train_rows = np.isin(qids, bench.train.qids)
    assert usd[0] == pytest.approx(0.00002)
    assert usd[1] == pytest.approx(((logs["tokens"][train_rows] * 20 + 12 * 40) / 1e6).mean())
    assert bench.rule_costs("money", 50.0).beta == pytest.approx((50.0 * (usd[1] - usd[0]),))
    scale = bench.money_prices
    assert scale == money_scale([usd[1] - usd[0]])

    # the evaluation: dollars per 1,000 questions paid, as the choice implies
    oracle = make_router("oracle").fit(bench)
    for lam in (0.0, scale[len(scale) // 2], scale[-1]):
        row = evaluate_router(bench, oracle, bench.money_costs(lam))
        choice = oracle.decide(bench.money_costs(lam)).choice
        assert row["usd_per_1k"] == pytest.approx(1000 * realised_latency(bench.test.usd, choice).mean())
        asked = float((choice == 1).mean())
        assert row["allocation"]["dear"] == pytest.approx(asked) and (lam > 0 or asked > 0)
    assert (oracle.decide(bench.money_costs(scale[-1])).choice == 0).all()  # no expert worth two errors
    capsys.readouterr()
    assert (
        evaluate.main(
            [
                "--dataset",
                "squad20",
                "--pool",
                "Priced",
                "--policy",
                "oracle",
                "--money-price",
                "100",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["usd_per_1k"] == pytest.approx(
        evaluate_router(bench, "oracle", bench.money_costs(100.0))["usd_per_1k"]
    )
    assert (
        evaluate.main(["--dataset", "squad20", "--pool", "P2v2", "--policy", "oracle", "--money-price", "1"])
        == 2
    )
    assert "money rule needs every agent's price per answer, and nlnet" in capsys.readouterr().err
    # random mixing is matched on dollars here: each agent alone costs its price (and the main
    # agent's, which answers first), and a router is above mixing by what the same money buys
    from l2d_core.app_logic.explorer import router_view
    from l2d_core.evaluation.gain import gain_over_mixing

    mix = bench.mixing_cost("test")
    assert mix.tolist() == pytest.approx([bench.test.usd[:, 0].mean(), bench.test.usd.sum(axis=1).mean()])
    view = router_view(bench, oracle, bench.money_costs(mid := scale[len(scale) // 2]))
    paid = realised_latency(bench.test.usd, view.decision.choice).mean()
    em_q = bench.test.em[np.arange(len(bench.test)), view.decision.choice]
    assert view.metrics["gain"] == pytest.approx(gain_over_mixing(em_q, bench.test.em, mix, paid)[0])
    # the cost–EM plane is in dollars too: the agents alone, the mixing hull, the router's point
    from l2d_core.app_logic.explorer import explore
    from l2d_core.report import charts

    plane = explore(bench, {"oracle": oracle}, bench.money_costs(mid)).plane
    agents = plane[plane["kind"] == "agent"]
    assert "gflops" not in plane and agents["usd_per_1k"].tolist() == pytest.approx((1000 * mix).tolist())
    point = plane.loc[plane["kind"] == "router", "usd_per_1k"].item()
    assert point == pytest.approx(1000 * paid) == pytest.approx(view.metrics["usd_per_1k"])
    assert (
        charts.plane_chart(plane).to_dict()["layer"][1]["encoding"]["x"]["title"] == "$ per 1,000 questions"
    )
    # the benchmark's comparison runs the pool's money prices, and its report says what each paid
    from l2d_core.evaluation.comparison import ComparisonPlan, run_comparison
    from l2d_core.report import report_markdown

    plan = ComparisonPlan(seeds=(0,), routers=["oracle", "conf-threshold", "zero"], n_boot=0, validate=False)
    results = run_comparison(bench, plan)
    assert results["money_points"] == list(scale)
    at = {p["money_price"]: p for p in results["routers"]["conf-threshold"]["points"] if "money_price" in p}
    assert sorted(at) == list(scale)
    row = evaluate_router(bench, make_router("conf-threshold").fit(bench), bench.money_costs(mid))
    assert at[mid]["usd_per_1k"] == pytest.approx(row["usd_per_1k"])
    assert at[mid]["em"] == pytest.approx(row["em"])
    # AIQ over dollars per 1,000 questions, between the cheapest and the dearest agent alone
    assert results["aiq_cost"] == "dollars per 1,000 questions"
    assert results["aiq_range"] == pytest.approx([1000 * mix.min(), 1000 * mix.max()])
    assert results["routers"]["oracle"]["aiq"] > results["routers"]["zero"]["aiq"] > 0
    report = report_markdown(results)
    assert "## Money (λ$ errors per dollar" in report and dollars(row["usd_per_1k"]) in report
    # exported for serving at λ$: the artifact carries the money rule's β
    import export_router

    from l2d_core.deploy import load_router

    out = tmp_path / "priced-router"
    flags = ["--pool", "Priced", "--router", "conf-threshold", "--out", str(out), "--quiet"]
    assert export_router.main([*flags, "--money-price", "100"]) == 0
    assert load_router(out).costs == bench.money_costs(100.0)


def test_the_cost_explorer_offers_the_money_rule_on_a_priced_pool(real_data, fresh_cache, tmp_path):
    """The money rule appears where every answer has a price, its slider steps over the pool's
    money prices, and the tile of dollars per 1,000 questions is what the decision paid; a pool
    without prices neither offers the rule nor shows the tile."""
    from _pages import open_page

    from l2d_core.app_logic.default_view import default_router
    from l2d_core.evaluation.benchmark import prepare
    from l2d_core.routers.registry import make_router

    logs = _import_priced_pool(tmp_path, list(load_dataset("squad20").qids), "0")
    bench = prepare("squad20", "Priced", features_needed=False)
    rid, lam = "conf-threshold", bench.money_prices[len(bench.money_prices) // 2]
    at = open_page("cost_explorer", "Priced")
    for k, v in {"dataset": "squad20", "routers": [rid], "cost_rule": "money", "money_price": lam}.items():
        at.session_state[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "a price per dollar" in at.radio(key="cost_rule").options
    slider = at.select_slider(key="money_price")
    assert [float(v) for v in slider.options] == list(bench.money_prices) and float(slider.value) == lam
    d = make_router(rid).fit(bench).decide(bench.money_costs(lam))
    tile = next(m.value for m in at.metric if m.label == "$ per 1,000 questions")
    paid = 1000 * realised_latency(bench.test.usd, d.choice).mean()
    assert float(tile.removeprefix("$")) == pytest.approx(paid, rel=1e-3)
    assert paid > 0 and "β = " in " ".join(c.value for c in at.caption)
    # opened afresh, the page starts on the money rule at the default router's best money price
    fresh = open_page("cost_explorer", "Priced")
    fresh.session_state["dataset"] = "squad20"
    fresh.run()
    choice = default_router(bench)
    assert choice.rule == "money" and choice.price in bench.money_prices
    assert fresh.radio(key="cost_rule").value == "money"
    assert float(fresh.select_slider(key="money_price").value) == choice.price
    said = " ".join(c.value for c in fresh.sidebar.caption)  # the rule's words, or why no router is
    assert (f"λ$ = {choice.price:g} errors per dollar" in said) if choice.pays else ("No router pays" in said)
    overview = open_page("overview", "Priced")
    overview.session_state["dataset"] = "squad20"
    overview.run()
    table = overview.dataframe[0].value.set_index("agent")
    dear = 1000 * (logs["tokens"] * 20 + 12 * 40).mean() / 1e6  # every question of the dataset
    assert table.loc["dear", "usd_per_1k"] == pytest.approx(dear) and table.loc["cheap", "usd_per_1k"] == 0.0
    single = open_page("single_query", "Priced")
    single.session_state["dataset"] = "squad20"
    single.run()
    assert not single.exception, [e.value for e in single.exception]
    shown = single.dataframe[-1].value.set_index("agent")["price"]
    rec = bench.test_records[single.selectbox(key="sq_index").value]
    usd = bench.test.usd[list(bench.test.qids).index(rec.qid)]
    assert shown.to_dict() == {"cheap": "$0", "dear": dollars(usd[1])}  # each answer's own price
    assert "e-" not in shown["dear"]  # millionths of a dollar in plain digits
    p2 = open_page("cost_explorer", "P2v2")
    p2.session_state["dataset"] = "squad20"
    p2.session_state["cost_rule"] = "money"
    p2.run()
    assert not p2.exception and "a price per dollar" not in p2.radio(key="cost_rule").options
    assert "$ per 1,000 questions" not in [m.label for m in p2.metric]
