"""End to end on the real benchmark (BENCHMARK.md split, real SQuAD systems), fast mode.

The embeddings of all 10,570 questions are computed once per session (~1–2 min on 2 cores)
and shared by these tests through the session cache directory.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from l2d_core.evaluation.benchmark import BETA_POINTS, prepare
from l2d_core.evaluation.comparison import evaluate_router
from l2d_core.routers.registry import make_router

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _script(name: str):
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def p3(real_data):
    return prepare("squad11", "P3")


def test_benchmark_split_and_features(p3):
    assert (len(p3.train), len(p3.test)) == (7975, 2595)
    assert p3.X_train.shape == (7975, 4 * 384) and np.isfinite(p3.X_train).all()
    assert p3.test.agent_ids == ("match-lstm", "rnet-plus", "bert-ens")
    assert 1.0 < p3.rejector_gflops < 50.0  # MiniLM-L6 at 384 tokens, measured


def test_evaluate_cli_json_p2_and_p3(real_data, capsys):
    evaluate = _script("evaluate")
    for pool in ("P2", "P3"):
        assert evaluate.main(["--pool", pool, "--policy", "sdl", "--beta1", "0.05", "--json", "--quiet"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert set(out) >= {
            "em",
            "f1",
            "gflops_per_query",
            "gflops_per_em",
            "allocation",
            "tpr",
            "fpr",
            "tdl",
            "tdl_random",
        }
        assert abs(sum(out["allocation"].values()) - 1.0) < 1e-9
        assert 60.0 < out["em"] < 95.0
        assert out["gflops_per_em"] == pytest.approx(out["gflops_per_query"] / out["em"])
        assert 0.0 <= out["tpr"] <= 1.0 and 0.0 <= out["fpr"] <= 1.0


def test_evaluate_cli_rejects_bad_costs_and_names(real_data, capsys):
    evaluate = _script("evaluate")
    assert evaluate.main(["--pool", "P3", "--beta1", "nan", "--quiet"]) == 2
    assert "finite" in capsys.readouterr().err
    assert evaluate.main(["--pool", "P3", "--beta1", "-0.1", "--quiet"]) == 2
    assert evaluate.main(["--pool", "NOPE", "--quiet"]) == 2
    assert "unknown pool" in capsys.readouterr().err
    assert evaluate.main(["--dataset", "squad11", "--pool", "P3v2", "--quiet"]) == 2


def test_sdl_allocation_follows_costs(p3):
    cheap, dear = (evaluate_router(p3, "sdl", p3.costs(b)) for b in (0.0, 0.5))
    assert cheap["router"] == "l2d-sdl"  # the short id names the registry's router
    expert_share = lambda r: 1.0 - r["allocation"]["match-lstm"]  # noqa: E731
    assert expert_share(dear) < expert_share(cheap) - 0.2
    assert dear["gflops_per_query"] < cheap["gflops_per_query"]


def test_plugin_sweep_is_monotone_and_instant(p3):
    plugin = make_router("plugin").fit(p3, 0)  # fitted once: every cost setting is a reweighting
    rows = [dict(evaluate_router(p3, plugin, p3.costs(b)), beta1=b) for b in BETA_POINTS]
    assert not any(plugin.needs_training(p3.costs(b)) for b in BETA_POINTS)
    main_share = [r["allocation"]["match-lstm"] for r in rows]
    assert [r["beta1"] for r in rows] == list(BETA_POINTS)
    assert all(b >= a - 1e-12 for a, b in zip(main_share, main_share[1:]))
    assert main_share[-1] > main_share[0]


def test_oracle_bounds_and_random(p3):
    costs = p3.costs(0.05)
    oracle, rnd, sdl = (evaluate_router(p3, r, costs) for r in ("oracle", "random", "sdl"))
    assert oracle["tdl"] <= sdl["tdl"] and oracle["tdl"] <= rnd["tdl"]
    assert oracle["em"] >= max(100 * p3.test.em.mean(axis=0)) - 1e-9
    assert rnd["tdl"] == pytest.approx(rnd["tdl_random"], abs=0.05)


def test_trained_rejector_is_cached_on_disk(p3, monkeypatch):
    costs = p3.costs(0.02)
    first = evaluate_router(p3, "sdl", costs)
    from l2d_core.routers.sdl import SDLRejector

    monkeypatch.setattr(SDLRejector, "fit", lambda *a, **k: pytest.fail("refit of a cached setting"))
    again = make_router("sdl").fit(p3, 0)  # a new router: the head comes from disk
    assert not again.needs_training(costs)
    assert evaluate_router(p3, again, costs) == first


def test_import_predictions_script_makes_an_agent(real_data, tmp_path, capsys, fresh_cache):
    evaluate, importer = _script("evaluate"), _script("import_predictions")
    src = json.loads((real_data / "predictions/squad-v1.1/r-net-microsoft-research-asia.json").read_text())
    preds = dict(list(src.items())[:-100])  # 100 missing ids: counted wrong, reported
    f = tmp_path / "mine.json"
    f.write_text(json.dumps(preds))
    rc = importer.main(
        [
            "--file",
            str(f),
            "--agent",
            "mine",
            "--dataset",
            "squad11",
            "--gflops",
            "4",
            "--pool",
            "Mine",
            "--main",
            "mine",
            "--experts",
            "bert-ens",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "missing ids (counted wrong): 100" in out
    assert evaluate.main(["--pool", "Mine", "--policy", "oracle", "--json", "--quiet"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert set(res["allocation"]) == {"mine", "bert-ens"}
    bad = tmp_path / "bad.json"
    bad.write_text(f.read_text()[:1000])
    assert importer.main(["--file", str(bad), "--agent", "mine", "--gflops", "4", "--replace"]) == 2
    assert "not valid JSON" in capsys.readouterr().err
