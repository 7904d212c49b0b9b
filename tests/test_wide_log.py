"""A log of prompts without passages or SQuAD ids, one column per model (RouterBench's sample of
365 prompts × 11 LLMs with each answer's score and price in dollars): imported as a dataset of its
own, an agent per model and a pool, then routed by money on the command line and the pages."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest

from l2d_core.agents import get_pool
from l2d_core.agents.wide_log import import_wide_log, prompt_text
from l2d_core.data import DataFormatError, dataset_names, load_dataset

SAMPLE = "llm_routing/routerbench-sample/reference_data.csv"


@pytest.fixture
def routerbench(real_data, fresh_cache):
    """The sample imported as dataset ``routerbench`` in a cache of the test's own: (report, log)."""
    path = real_data / SAMPLE
    return import_wide_log(path, "routerbench", label=path.name), pd.read_csv(path)


def test_the_log_becomes_a_dataset_its_agents_and_a_pool(routerbench):
    report, log = routerbench
    models = [c.removesuffix("|total_cost") for c in log.columns if c.endswith("|total_cost")]
    ds = load_dataset("routerbench")
    assert "routerbench" in dataset_names() and len(ds) == len(log) == 365 and len(models) == 11
    assert all(r.context == "" and r.answers == () for r in ds) and ds[
        log["sample_id"][0]
    ].question.startswith("Please answer with the letter")  # the prompt's text, not its Python-list spelling
    price = {m: log[f"{m}|total_cost"].mean() for m in models}
    cheapest = min(models, key=price.get)
    pool = get_pool("routerbench")
    assert pool.main == report.agents[0][0] and pool.main.endswith(cheapest.split("/")[-1].lower())
    assert len(pool.experts) == 10
    for (_, right, usd), m in zip(report.agents, sorted(models, key=price.get)):
        assert right == pytest.approx(100 * (log[m] >= 0.5).mean()) and usd == pytest.approx(1000 * price[m])
    assert report.partial == int((~log[models].isin([0, 1])).sum().sum()) > 0  # gsm8k's shares of samples
    # the split: a quarter of the prompts, fixed by their ids (each prompt its own article)
    held = [q for q in log["sample_id"] if int(hashlib.sha256(q.encode()).hexdigest(), 16) % 4 == 0]
    assert report.test_questions == len(held) and 60 < len(held) < 120


def test_routers_run_on_it_by_money(routerbench, capsys):
    import evaluate

    from l2d_core.evaluation.benchmark import prepare
    from l2d_core.evaluation.comparison import evaluate_router
    from l2d_core.method.costs import realised_latency
    from l2d_core.routers.registry import make_router

    bench = prepare("routerbench", "routerbench", features_needed=False)
    assert (
        bench.has_money and bench.money_prices[0] == 0.0 and len(bench.test) == routerbench[0].test_questions
    )
    lam = bench.money_prices[len(bench.money_prices) // 2]
    rows = {rid: evaluate_router(bench, rid, bench.money_costs(lam)) for rid in ("oracle", "random", "zero")}
    assert rows["oracle"]["em"] >= rows["zero"]["em"] >= rows["random"]["em"]
    choice = make_router("oracle").fit(bench).decide(bench.money_costs(lam)).choice
    assert rows["oracle"]["usd_per_1k"] == pytest.approx(
        1000 * realised_latency(bench.test.usd, choice).mean()
    )
    argv = ["--dataset", "routerbench", "--pool", "routerbench", "--policy", "oracle", "--json"]
    assert evaluate.main([*argv, "--money-price", str(lam), "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["usd_per_1k"] == pytest.approx(rows["oracle"]["usd_per_1k"])


def test_the_pages_route_its_prompts(routerbench):
    from _pages import open_page

    def run(name):
        at = open_page(name, "routerbench")
        at.session_state["dataset"] = "routerbench"
        at.run()
        assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
        return at

    explorer = run("cost_explorer")
    shown = explorer.sidebar.selectbox(key="dataset").options
    assert "routerbench — 365 prompts of reference_data.csv, no passages" in shown
    assert explorer.radio(key="cost_rule").value == "money"
    assert "$ per 1,000 questions" in [m.label for m in explorer.metric]
    single = run("single_query")  # a prompt of the dataset: routed by its recorded answers, no passage
    assert len(single.dataframe[-1].value) == 11
    assert any("no passage and no gold answer" in c.value for c in single.caption)
    assert not any("Not paid" in c.value for c in single.caption)  # a logged answer was paid for


@pytest.mark.parametrize(
    "text, says",
    [
        ("sample_id,prompt,a,a|total_cost\n1,x,1,0.1\n", "needs two models or more"),
        (
            "sample_id,prompt,a,a|total_cost,b,b|total_cost\n1,x,2,0.1,1,0.2\n",
            "row 1, model a: needs a score",
        ),
        ("sample_id,prompt,a,a|total_cost,b,b|total_cost\n1,x,1,-1,1,0.2\n", "row 1, model a"),
        (
            "sample_id,prompt,a,a|total_cost,b,b|total_cost\n1,x,1,1,1,1\n1,y,0,1,0,1\n",
            "id '1' appears twice",
        ),
        ("id,text\n1,x\n", "no prompt column"),
        ("sample_id,prompt,a,a|total_cost,b,b|total_cost\n1,,1,1,1,1\n", "row 1 has no prompt"),
    ],
)
def test_a_bad_log_is_one_line_and_registers_nothing(fresh_cache, tmp_path, text, says):
    path = tmp_path / "log.csv"
    path.write_text(text)
    with pytest.raises(DataFormatError, match=says) as err:
        import_wide_log(path, "mine")
    assert "\n" not in str(err.value) and "mine" not in dataset_names()
    with pytest.raises(DataFormatError, match="is built in"):
        import_wide_log(path, "squad11")


def test_a_prompt_written_as_a_list_is_its_turns():
    assert prompt_text("['a', 'b']") == "a\n\nb" and prompt_text("[not python") == "[not python"
    assert prompt_text(None) == "" and prompt_text("  plain ") == "plain"


def test_the_overview_imports_the_sample_of_the_data_directory(real_data, fresh_cache):
    """Without a terminal: the Overview's routing-log form imports the RouterBench sample, and the
    sidebar then offers its dataset."""
    from _pages import open_page

    at = open_page("overview", "P2").run()
    at.button(key="wide_sample").click().run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert any("dataset routerbench: 365 prompts" in s.value for s in at.success)
    assert any(o.startswith("routerbench — ") for o in at.sidebar.selectbox(key="dataset").options)
    assert get_pool("routerbench").dataset == "routerbench"
