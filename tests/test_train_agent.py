"""scripts/train_agent.py (a thin wrapper of l2d_core.agents.train_cli) on a tiny BERT built
offline and a few real SQuAD questions: cross-fitting (no model answers an article it was
trained on), registration, resume, and the progress file the dashboard reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import train_agent
from _tiny_models import one_thread

from l2d_core.agents import train_cli


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    with one_thread():
        yield


ARGS = ["--agent-id", "tiny-qa", "--limit", "6", "--epochs", "1", "--batch-size", "4", "--quiet"]


def test_crossfitted_training_registers_the_agent_and_resumes(
    real_data, fresh_cache, bert_path, capsys, monkeypatch
):
    from l2d_core.agents import get_agent, get_pool
    from l2d_core.agents.cache import AgentCache
    from l2d_core.data import BENCHMARK_TEST_ARTICLES, load_dataset

    argv = [*ARGS, "--base", str(bert_path), "--pools", "P3-tiny=rnet-plus,bert-ens", "P2-tiny=bert-ens"]
    from l2d_core import background

    seen = []  # the run's progress file (its background job's) as the dashboard reads it, at every write
    progress_file, write = background.job_file(train_cli.train_key("tiny-qa")), background.atomic_write_text

    def spy(path, text, *args):
        write(path, text, *args)
        if Path(path) == progress_file:
            seen.append(json.loads(progress_file.read_text()))

    monkeypatch.setattr(background, "atomic_write_text", spy)
    assert train_agent.main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "tiny-qa:" in out and "EM" in out and "training total" in out
    stages = [(p["stage"], p["current"]) for p in seen]
    assert stages[0] == ("starting", "") and seen[-1]["state"] == "done"
    assert [s for s in dict.fromkeys(stages) if s[0] != "starting"] == [
        *[("fine-tuning", m) for m in ("fold0", "fold1", "full")],
        *[("answering", m) for m in ("fold0", "fold1", "full")],
        ("registering", "full"),
    ]
    for stage in ("fine-tuning", "answering"):  # every step and every answer counted, up to its total
        ends = [p for p in seen if p["stage"] == stage and p["done"] == p["total"] > 0]
        assert len(ends) >= 3 and all(p["left_s"] == 0 for p in ends)
    assert max(p["total"] for p in seen if p["stage"] == "answering") == 6  # --limit 6 per model
    assert all(p["pid"] == os.getpid() and p["updated_at"] <= time.time() for p in seen)
    assert not list(progress_file.parent.glob(".*.part"))  # written through a temporary file

    root = fresh_cache / "models" / "tiny-qa"
    plan = json.loads((root / "crossfit.json").read_text())
    assert set(plan["models"]) == {"fold0", "fold1", "full"}
    for m in plan["models"].values():  # nobody answers an article it was trained on
        assert not set(m["trained_on"]) & set(m["answers"])
    assert set(plan["models"]["full"]["answers"]) <= set(BENCHMARK_TEST_ARTICLES)
    assert not set(plan["models"]["full"]["trained_on"]) & set(BENCHMARK_TEST_ARTICLES)

    cache = AgentCache()
    table = cache.table("squad11", "tiny-qa")
    assert len(table) == 3 * 6  # --limit 6 per model: two folds + the full model
    titles = {r.qid: r.title for r in load_dataset("squad11")}
    answered = {t for m in plan["models"].values() for t in m["answers"]}
    assert {titles[q] for q in table.index} <= answered
    assert (table["gflops"].astype(float) > 0).all() and table["em"].between(0, 1).all()
    conf = pd.DataFrame(list(table["confidence"]))  # every answer carries the model's confidence
    assert set(conf.columns) >= {"span_prob", "start_logit", "end_logit", "margin", "windows"}
    assert (
        conf["span_prob"].between(0, 1).all() and (conf["margin"] >= 0).all() and (conf["windows"] >= 1).all()
    )

    spec = get_agent("tiny-qa")
    assert spec.kind == "extractive" and spec.gflops_source == "measured" and spec.gflops > 0
    assert Path(spec.path) == root / "full" and (root / "full" / "l2d_training.json").is_file()
    assert get_pool("P3-tiny").agent_ids == ("tiny-qa", "rnet-plus", "bert-ens")
    assert get_pool("P2-tiny").agent_ids == ("tiny-qa", "bert-ens")
    assert "train_agent.py" in cache.meta("squad11", "tiny-qa")["answered_by"]

    # answers cached without confidence (an older version) are answered again, resumably
    first = next(iter(table.index))
    old = {**cache.get("squad11", "tiny-qa", first), "confidence": None}
    cache.put_many("squad11", "tiny-qa", {first: old})
    assert first not in cache.ids_with("squad11", "tiny-qa", "confidence")
    assert train_agent.main(argv) == 0
    assert first in cache.ids_with("squad11", "tiny-qa", "confidence")

    # resume: nothing retrained, nothing recomputed
    marker = (root / "fold0" / "l2d_training.json").stat().st_mtime_ns
    generation = cache.meta("squad11", "tiny-qa")
    assert train_agent.main(argv) == 0
    assert (root / "fold0" / "l2d_training.json").stat().st_mtime_ns == marker
    assert len(cache.table("squad11", "tiny-qa")) == 18
    assert cache.meta("squad11", "tiny-qa")["training"] == generation["training"]

    # other settings into the same folder: refused, nothing lost
    assert train_agent.main([*argv, "--folds", "3"]) == 2
    assert "other settings" in capsys.readouterr().err
    assert len(cache.table("squad11", "tiny-qa")) == 18


def test_bad_base_model_is_a_clear_error(real_data, fresh_cache, tmp_path, capsys):
    rc = train_agent.main([*ARGS, "--base", str(tmp_path / "nowhere")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "error:" in err and "nowhere" in err and "Traceback" not in err
    p = train_cli.read_progress("tiny-qa")  # the dashboard reads why it stopped
    assert p.state == "failed" and "nowhere" in p.error and p.stage == "fine-tuning"


def test_the_script_is_the_package_module_and_keeps_its_help():
    assert train_agent.main is train_cli.main
    root = Path(__file__).resolve().parent.parent
    by_path = subprocess.run(
        [sys.executable, "scripts/train_agent.py", "--help"], cwd=root, capture_output=True, text=True
    )
    by_module = subprocess.run(
        [sys.executable, "-m", "l2d_core.agents.train_cli", "--help"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert by_path.returncode == by_module.returncode == 0
    assert "--profile {full,quick}" in by_path.stdout and "cross-fitted" in by_path.stdout
    # the same text after the usage lines (whose program name differs)
    assert by_path.stdout.split("\n\n", 1)[1] == by_module.stdout.split("\n\n", 1)[1]


def test_quick_profile_trains_one_model_and_its_pool_routes_on_what_it_answered(
    real_data, fresh_cache, bert_path, capsys
):
    """``--profile quick``: one model answers its held-out fold and every test question; the pool
    it registers is routed on exactly the questions its main agent answered (a subset on purpose),
    while a model agent with gaps and no such mark is refused."""
    from l2d_core.agents import get_agent, get_pool
    from l2d_core.agents.cache import AgentCache
    from l2d_core.agents.read_in import AgentNotCachedError
    from l2d_core.agents.routing_data import load_routing_data
    from l2d_core.data import BENCHMARK_TEST_ARTICLES, benchmark_split, load_dataset

    argv = ["--profile", "quick", "--base", str(bert_path), "--limit", "6", "--batch-size", "4", "--quiet"]
    assert train_agent.main(argv) == 0, capsys.readouterr().err
    root = fresh_cache / "models" / "minilm-qa-quick"
    plan = json.loads((root / "crossfit.json").read_text())
    assert list(plan["models"]) == ["fold0"] and plan["profile"] == "quick"
    m = plan["models"]["fold0"]
    assert not set(m["trained_on"]) & set(m["answers"]) and set(BENCHMARK_TEST_ARTICLES) <= set(m["answers"])
    spec = get_agent("minilm-qa-quick")
    assert Path(spec.path) == root / "fold0" and "quick" in spec.name
    assert get_pool("P3-quick").agent_ids == ("minilm-qa-quick", "rnet-plus", "bert-ens")

    ds = load_dataset("squad11")
    _, test = benchmark_split(ds)
    cache = AgentCache()
    answered = cache.ids_with("squad11", "minilm-qa-quick", "confidence")
    assert len(answered) == 6 + len(test) < len(ds)
    data = load_routing_data(ds, get_pool("P3-quick"), cache)
    assert set(data.qids) == answered and len(data) == len(answered)
    assert set(data.titles) == {ds[q].title for q in answered}

    cache.set_meta("squad11", "minilm-qa-quick", partial=False)  # gaps without the mark: refused
    with pytest.raises(AgentNotCachedError, match="minilm-qa-quick"):
        load_routing_data(ds, get_pool("P3-quick"), cache)


def test_each_dataset_gets_its_own_live_agent_and_pools_of_its_own_agents(real_data):
    """Agent ids are global: a run on squad20 trains minilm-qa-quick-squad20 and never replaces the
    squad11 agent, and it registers pools whose experts answer squad20 (P3-quick's rnet-plus
    answers squad11 only: a squad20 run once failed there, after training); MADE_BY, which the
    'unknown pool' error quotes, names the command that makes each pool."""
    from l2d_core.agents import get_agent
    from l2d_core.agents.catalog import MADE_BY
    from l2d_core.agents.profiles import PROFILES, train_command

    made = {}
    for name, profile in PROFILES.items():
        for dataset, _ in profile.pools:
            args = train_cli.parse_args(["--dataset", dataset, "--profile", name])
            assert (args.agent_id, args.pools) == (
                profile.agent_for(dataset),
                list(profile.pools_for(dataset)),
            )
            for pool, experts in profile.pool_specs(dataset):
                assert experts and all(get_agent(e).dataset == dataset for e in experts), (pool, experts)
                made[pool] = train_command(name, dataset)
        assert len({profile.agent_for(d) for d, _ in profile.pools}) == len(profile.pools)
    assert made == MADE_BY
    quick20 = "python scripts/train_agent.py --dataset squad20 --profile quick"
    assert train_command("quick", "squad20") == quick20
    assert (PROFILES["full"].agent_for("squad11"), PROFILES["quick"].agent_for("squad20")) == (
        "minilm-qa",
        "minilm-qa-quick-squad20",
    )
    assert train_cli.parse_args(["--dataset", "hf-squad"]).pools == []  # no experts set there: no pool


def test_training_labels_find_answers_the_file_gives_no_offset_for(bert_path):
    """The derived SQuAD v2.0 file gives no answer offsets: the label is the answer's first
    occurrence in the context (a squad20 run once stopped on a TypeError here); an unanswerable
    question, or an answer the context does not hold, is labelled [CLS] (0, 0)."""
    from l2d_core.agents.base import load_tokenizer
    from l2d_core.agents.qa_training import train_features
    from l2d_core.data.records import QARecord

    ctx = "The treaty was signed in Prague in 1635, and the court moved to Vienna later."
    rec = lambda answers, starts=(): QARecord("q", "t", ctx, "Where was it signed?", answers, starts)  # noqa: E731
    feats = train_features(
        load_tokenizer(bert_path),
        [
            rec(("Prague",), (ctx.index("Prague"),)),
            rec(("Prague",), (None,)),
            rec(()),
            rec(("Berlin",), (None,)),
        ],
        384,
        128,
    )
    spans = list(zip(feats["start"], feats["end"]))
    assert spans[0] == spans[1] and 0 < spans[0][0] <= spans[0][1]
    assert spans[2] == spans[3] == (0, 0)


def test_a_squad20_run_trains_its_own_agent_and_calibrates_no_answer(
    real_data, fresh_cache, bert_path, capsys
):
    """End to end on SQuAD v2.0 (answers without offsets, unanswerable questions): the run trains
    minilm-qa-quick-squad20, picks its no-answer threshold on held-out training questions (never a
    test question) and registers it with the pool P3v2-quick of squad20's own agents."""
    from l2d_core.agents import get_agent, get_pool
    from l2d_core.agents.cache import AgentCache

    argv = [
        "--dataset",
        "squad20",
        "--profile",
        "quick",
        "--base",
        str(bert_path),
        "--limit",
        "30",
        "--quiet",
    ]
    assert train_agent.main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "[fold0] calibrating 'no answer' on 30 held-out questions" in out and "no-answer threshold" in out
    spec = get_agent("minilm-qa-quick-squad20")
    assert spec.dataset == "squad20" and spec.options["null_answer"] is True
    assert isinstance(spec.options["null_threshold"], float)
    assert get_pool("P3v2-quick").agent_ids == ("minilm-qa-quick-squad20", "nlnet", "bert-single")
    assert "minilm-qa-quick-squad20" in AgentCache().agents("squad20")
    # a run with another threshold (here one that never answers) does not keep the answers made at
    # the old one: the routers learn from what the registered agent says
    saved = fresh_cache / "models" / "minilm-qa-quick-squad20" / "null_threshold.json"
    saved.write_text(json.dumps({"threshold": 1e9}), encoding="utf-8")
    assert train_agent.main(argv) == 0, capsys.readouterr().err
    assert get_agent("minilm-qa-quick-squad20").options["null_threshold"] == 1e9
    answers = AgentCache().table("squad20", "minilm-qa-quick-squad20")["answer"]
    assert len(answers) > 30 and (answers.fillna("") == "").all()
