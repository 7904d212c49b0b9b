"""Real data: the 13 leaderboard prediction files of the builtin registry, imported and scored.

Every leaderboard agent's EM/F1 must reproduce ``our_dev_scores`` of
``predictions/leaderboard_summary.json`` (an independent scorer), the newer systems' files the
dev scores of MANIFEST.md §5, the logistic-regression file's coverage quirks must be reported,
SPEC §2 positions must agree with EM, and the datasets must have the BENCHMARK.md shape.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from l2d_core.agents import AgentSpec, import_predictions
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.catalog import BUILTIN
from l2d_core.data import BENCHMARK_TEST_ARTICLES, benchmark_split, load_dataset

TOL = 0.0015  # percent points: the summary rounds to 3 decimals
DATASET_OF_SUMMARY = {"squad-v1.1": "squad11", "squad-v2.0": "squad20"}

# The builtin registry itself (not list_agents(): a user registry.json must not change the set).
ALL_BUILTIN = [AgentSpec(**a) for a in json.loads(BUILTIN.read_text(encoding="utf-8"))["agents"]]
# BENCHMARK.md's leaderboard agents (2016–18 systems, the files leaderboard_summary.json describes)
LEADERBOARD_IDS = (
    *("logreg", "dcr", "span-clf", "rasor", "rnet", "coattn", "match-lstm", "rnet-plus", "slqa-plus"),
    *("bert-ens", "bidaf-elmo", "nlnet", "bert-single"),
)
BUILTIN_AGENTS = [a for a in ALL_BUILTIN if a.id in LEADERBOARD_IDS]
# newer systems on v1.1 dev: EM / F1 as MANIFEST.md §5 states them (its own scorer, 2 decimals)
MANIFEST_SCORES = {
    "albert-base": (80.28, 88.56),
    "electra-base": (87.00, 92.64),
    "deberta-v3-base": (83.56, 91.43),
    "bert-base": (66.58, 76.84),
    "qanet": (64.82, 75.60),
}


def test_builtin_registry_has_the_13_benchmark_agents():
    ids = [a.id for a in ALL_BUILTIN]
    assert len(set(ids)) == len(ids)
    assert len(BUILTIN_AGENTS) == 13
    assert sum(a.dataset == "squad11" for a in BUILTIN_AGENTS) == 10
    assert sum(a.dataset == "squad20" for a in BUILTIN_AGENTS) == 3
    assert all(a.kind == "prediction_file" for a in BUILTIN_AGENTS)
    assert set(MANIFEST_SCORES) <= set(ids)


@pytest.mark.parametrize("agent_id", sorted(MANIFEST_SCORES))
def test_newer_systems_reproduce_the_manifest_scores(agent_id, importer):
    report, _ = importer(next(a for a in ALL_BUILTIN if a.id == agent_id))
    em, f1 = MANIFEST_SCORES[agent_id]
    assert report.em == pytest.approx(em, abs=0.006) and report.f1 == pytest.approx(f1, abs=0.006)


@pytest.fixture(scope="module")
def summary(real_data) -> dict[str, dict]:
    """leaderboard_summary.json systems keyed by their slug (the prediction file's stem)."""
    doc = json.loads((real_data / "predictions" / "leaderboard_summary.json").read_text(encoding="utf-8"))
    systems = {s["slug"]: s for s in doc["systems"]}
    assert len(systems) == 13
    return systems


@pytest.fixture(scope="module")
def importer(real_data, tmp_path_factory):
    """Imports each agent once into a fresh cache of this module; returns (report, cache)."""
    cache = AgentCache(tmp_path_factory.mktemp("real_predictions") / "agents")
    reports = {}

    def run(spec: AgentSpec):
        if spec.id not in reports:
            reports[spec.id] = import_predictions(spec, load_dataset(spec.dataset), cache)
        return reports[spec.id], cache

    yield run
    cache.close()


def _entry(summary: dict, spec: AgentSpec) -> dict:
    slug = Path(spec.path).stem
    assert slug in summary, f"{spec.id}: no leaderboard_summary entry for {slug}"
    entry = summary[slug]
    assert entry["file"] == spec.path
    assert DATASET_OF_SUMMARY[entry["dataset"]] == spec.dataset
    return entry


@pytest.mark.parametrize("spec", BUILTIN_AGENTS, ids=[a.id for a in BUILTIN_AGENTS])
def test_import_reproduces_our_dev_scores(spec, summary, importer):
    entry = _entry(summary, spec)
    report, cache = importer(spec)
    want = entry["our_dev_scores"]
    assert report.em == pytest.approx(want["em"], abs=TOL)
    assert report.f1 == pytest.approx(want["f1"], abs=TOL)
    # coverage as recorded by the summary, and the very file it describes
    cov = entry["coverage"]
    assert report.questions == cov["dev_questions"]
    assert report.answered == cov["answered"]
    assert report.missing == cov["dev_questions"] - cov["answered"]
    assert report.unknown_ids == cov["ids_not_in_dev"]
    assert report.sha256 == entry["sha256"]
    # what the cache holds agrees with the report (the full table is packed in the tests below and
    # in test_routing_data; packing costs ~1 s per agent, so here only the metadata)
    meta = cache.meta(spec.dataset, spec.id)
    assert meta["sha256"] == entry["sha256"] and meta["gflops"] == spec.gflops
    assert meta["missing"] == report.missing and meta["unknown_ids"] == report.unknown_ids


def _spec(agent_id: str) -> AgentSpec:
    return next(a for a in BUILTIN_AGENTS if a.id == agent_id)


def test_bert_ensemble_headline_numbers(importer):
    report, _ = importer(_spec("bert-ens"))
    assert round(report.em, 2) == 86.21
    assert round(report.f1, 2) == 92.20
    assert report.missing == 0 and report.unknown_ids == 0


def test_logreg_missing_and_unknown_ids(importer):
    report, cache = importer(_spec("logreg"))
    assert report.questions == 10_570
    assert report.missing == 13
    assert report.answered == 10_557
    assert report.unknown_ids == 28
    ds = load_dataset("squad11")
    assert len(report.unknown_examples) == 3
    assert all(q not in ds for q in report.unknown_examples)
    assert "missing ids (counted wrong): 13" in "\n".join(report.lines())

    table = cache.table("squad11", "logreg")
    missing = table[table["status"] == "missing"]
    assert len(missing) == 13
    assert (missing["em"] == 0).all() and (missing["f1"] == 0).all()
    assert not missing["start_ok"].any() and not missing["end_ok"].any()
    assert missing["answer"].isna().all()
    # the 28 extra ids are ignored, not stored
    assert not set(report.unknown_examples) & cache.done_ids("squad11", "logreg")
    row = cache.summary("squad11", ["logreg"]).iloc[0]
    assert row["missing"] == 13 and row["questions"] == 10_570
    assert row["em"] == pytest.approx(report.em, abs=1e-9) and row["f1"] == pytest.approx(report.f1, abs=1e-9)
    assert row["gflops"] == 0.05 and row["gflops_source"] == "declared"


def test_positions_agree_with_em_for_bert_ensemble(importer):
    _, cache = importer(_spec("bert-ens"))
    t = cache.table("squad11", "bert-ens")
    assert len(t) == 10_570 and (t["gflops"] == 1730).all()
    assert 100 * t["em"].mean() == pytest.approx(86.206, abs=TOL)
    em = t["em"].to_numpy() == 1
    both = t["start_ok"].to_numpy(bool) & t["end_ok"].to_numpy(bool)
    assert em.sum() > 9_000
    assert (em & ~both).mean() < 0.005, "EM = 1 but a wrong start/end position"
    # and an exact match should be the usual way to get both endpoints right
    assert (both & ~em).mean() < 0.02
    assert set(t["status"]) <= {"exact", "ambiguous", "offset", "substring", "null", "not_found"}
    assert (t["start"] <= t["end"]).all()


def test_squad11_facts(real_data):
    ds = load_dataset("squad11")
    assert len(ds) == 10_570
    assert len(ds.titles) == 48
    assert not ds.v2
    train, test = benchmark_split(ds)
    assert (len(train), len(test)) == (7_975, 2_595)
    assert set(test.titles) == set(BENCHMARK_TEST_ARTICLES)
    assert len(set(test.titles)) == 14 and len(train.titles) == 34
    assert not set(train.titles) & set(test.titles)


def test_squad20_facts(real_data):
    ds = load_dataset("squad20")
    assert len(ds) == 11_873
    assert ds.v2 is True
    impossible = sum(r.is_impossible for r in ds)
    assert impossible == 5_945
    assert all((len(r.answers) == 0) == r.is_impossible for r in ds)
    assert np.isclose(impossible / len(ds), 0.5, atol=0.01)
