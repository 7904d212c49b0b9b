"""Router artifacts: every router of the registry is saved (or refused with the reason), loaded
back and routes new text as it did in memory; a saved cascade reproduces the benchmark's test
decisions; an artifact from another version, a damaged head or a different model is refused."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from l2d_core.deploy import ArtifactError, QueryError, deploy, export_problem, load_router
from l2d_core.evaluation.budget_results import budget_decision
from l2d_core.method.costs import CostConfig
from l2d_core.routers.base import exportable
from l2d_core.routers.encoder import load_encoder
from l2d_core.routers.features import featurize
from l2d_core.routers.registry import AGENT_PREFIX, make_router, router_class, router_ids

CONTEXT = "Moby-Dick is an 1851 novel by American writer Herman Melville about the whale."
QUERIES = [("Who wrote Moby-Dick?", CONTEXT), ("When was Moby-Dick written?", CONTEXT)]


@pytest.fixture(scope="module")
def tiny_enc_bench(live_bench, bert_path):
    """The live slice with real (tiny BERT) question/context embeddings: ex-ante routers export."""
    enc = load_encoder(str(bert_path), device="cpu")
    X = {s: featurize(enc, getattr(live_bench, f"{s}_records")) for s in ("train", "test")}
    return dataclasses.replace(
        live_bench, X_train=X["train"], X_test=X["test"], encoder_name=str(bert_path), features="separate"
    )


@pytest.fixture(scope="module")
def cascade(live_bench):
    return make_router("l2d-cascade").fit(live_bench)


def saved(router, costs, tmp_path, budget=None):
    d = deploy(router, costs, budget)
    return d, load_router(d.save(tmp_path / "artifact"))


@pytest.mark.parametrize("router_id", router_ids())
def test_every_registry_router_exports_or_says_why(router_id, tiny_enc_bench, tmp_path):
    router = make_router(router_id)
    problem = export_problem(router)
    if problem is not None:  # a router that says it does not route a query on its own
        assert not exportable(router_class(router_id)) and "cannot route a new query on its own" in problem
        with pytest.raises(ArtifactError):
            deploy(router.fit(tiny_enc_bench), tiny_enc_bench.costs(0.05))
        return
    router.fit(tiny_enc_bench)
    mem, disk = saved(router, tiny_enc_bench.costs(0.05), tmp_path)
    qids = None
    if not disk.describe()["routes_new_text"]:  # helpers known only by their prediction files
        with pytest.raises(QueryError, match="prediction file"):
            disk.route_batch(QUERIES)
        recs = tiny_enc_bench.test_records[:2]
        qids = [r.qid for r in recs]
        queries = [(r.question, r.context) for r in recs]
    a, b = (
        mem.route_batch(queries if qids else QUERIES, qids),
        disk.route_batch(queries if qids else QUERIES, qids),
    )
    assert [r["agent"] for r in a] == [r["agent"] for r in b]
    assert all(r["agent"] in ("tiny-live", "bert-ens") for r in b)
    if a[0]["compared"] is not None:
        assert a[0]["compared"] == b[0]["compared"]
        for r in b:  # what a response shows is what it decided: the chosen agent has the least value
            shown = {k: v for k, v in r["compared"]["values"].items() if v is not None}
            assert shown[r["agent"]] == min(shown.values())
    assert json.dumps(b)  # a response is plain JSON


def test_single_agents_route_everything_to_themselves(live_bench, tmp_path):
    router = make_router(AGENT_PREFIX + "bert-ens").fit(live_bench)
    _, disk = saved(router, live_bench.costs(0.05), tmp_path)
    r = disk.answer("Who wrote Moby-Dick?", CONTEXT)
    assert r["agent"] == "bert-ens" and r["answer"]["status"] == "cannot_answer"
    assert r["answer"]["text"] is None and "prediction file" in r["answer"]["message"]


def test_saved_cascade_reproduces_the_benchmark_decisions(live_bench, cascade, tmp_path):
    costs = CostConfig((1.0,), (0.3,))
    _, disk = saved(cascade, costs, tmp_path)
    recs = live_bench.test_records
    routed = disk.route_batch([(r.question, r.context) for r in recs], [r.qid for r in recs])
    expected = cascade.decide(costs).choice
    assert [r["agent_index"] for r in routed] == expected.tolist()
    np.testing.assert_allclose(
        [[r["chance_wrong"][a]["start"] for a in disk.agent_ids] for r in routed],
        cascade.p_err_[:, 0],
        atol=1e-6,
    )


def test_cascade_on_new_text_reads_the_main_answer_and_pays_it_once(cascade, tmp_path):
    _, disk = saved(cascade, CostConfig((1.0,), (5.0,)), tmp_path)  # a dear expert: main keeps it
    r = disk.answer("Who wrote Moby-Dick?", CONTEXT)
    assert r["agent"] == "tiny-live" and not r["deferred"]
    assert r["signals"]["main_answer"] in CONTEXT and 0 <= r["signals"]["main_confidence"]["span_prob"] <= 1
    assert r["answer"] == {
        "agent": "tiny-live",
        "status": "ran",
        "text": r["signals"]["main_answer"],
        "latency_ms": r["signals"]["main_latency_ms"],
    }
    assert r["gflops"]["chosen_agent"] == 0.0 and r["gflops"]["total"] == r["gflops"]["router"] > 0
    free = load_router(deploy(cascade, CostConfig((0.0,), (0.0,))).save(tmp_path / "free"))
    d = free.answer("Who wrote Moby-Dick?", CONTEXT)
    assert d["agent"] == "bert-ens" and d["answer"]["status"] == "cannot_answer"
    # bert-ens cannot answer new text: it is not paid, and the response says what it would cost
    assert d["gflops"]["chosen_agent"] == 0.0 and d["gflops"]["total"] == d["gflops"]["router"]
    assert d["gflops"]["unpaid"] == {"bert-ens": pytest.approx(free.specs["bert-ens"].gflops)}


@pytest.mark.parametrize("budget", [("share", 0.3), ("gflops", 40.0)])
def test_a_budget_travels_with_the_artifact_and_is_followed_alike(live_bench, cascade, tmp_path, budget):
    """The artifact starts the budget's follower where the benchmark did: routing the test
    questions in order makes the same decisions, query by query, and explains them the same way."""
    costs = live_bench.costs(0.05)
    _, disk = saved(cascade, costs, tmp_path, budget=budget)
    decision, result = budget_decision(cascade, costs, *budget)
    assert disk.manifest["budget"]["target"] == budget[1] and disk.budget["follower"] == result.follower
    recs = live_bench.test_records
    routed = disk.route_batch([(r.question, r.context) for r in recs], [r.qid for r in recs])
    assert [r["agent_index"] for r in routed] == decision.choice.tolist()
    shown = np.array([[r["compared"]["values"][a] for a in disk.agent_ids] for r in routed])
    np.testing.assert_allclose(shown, decision.expected, rtol=1e-9, atol=1e-12)
    again = load_router(tmp_path / "artifact")  # a fresh process starts from the saved state again
    first = again.route_batch([(recs[0].question, recs[0].context)], [recs[0].qid])[0]
    assert (first["agent"], first["compared"]) == (routed[0]["agent"], routed[0]["compared"])


def test_bad_queries_name_the_field(cascade, tmp_path):
    _, disk = saved(cascade, CostConfig((1.0,), (0.3,)), tmp_path)
    with pytest.raises(QueryError, match="question must be non-empty") as err:
        disk.route("  ", CONTEXT)
    assert err.value.field == "question"
    with pytest.raises(QueryError) as err:
        disk.route("Who?", None)
    assert err.value.field == "context"


def test_artifacts_of_another_version_or_damaged_are_refused(cascade, tmp_path, bert_path):
    _, disk = saved(cascade, CostConfig((1.0,), (0.3,)), tmp_path)
    folder = disk.source
    manifest = json.loads((folder / "router.json").read_text())
    for key, words in (("format", "artifact format"), ("scoring", "scoring"), ("features", "answer-feature")):
        bad = json.loads(json.dumps(manifest))
        bad["versions"][key] = -1
        (folder / "router.json").write_text(json.dumps(bad))
        with pytest.raises(ArtifactError, match=words):
            load_router(folder)
    (folder / "router.json").write_text(json.dumps(manifest))
    weights = folder / "estimator" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ArtifactError, match="trained head .* cannot be read"):
        load_router(folder)
    with pytest.raises(ArtifactError, match="not a router artifact"):
        load_router(tmp_path / "nowhere")


def test_a_retrained_main_agent_is_refused(cascade, tmp_path):
    d = deploy(cascade, CostConfig((1.0,), (0.3,)))
    d.manifest["config"]["main_fingerprint"] = "0" * 16
    with pytest.raises(ArtifactError, match="not the model this router was calibrated on"):
        load_router(d.save(tmp_path / "a"))


@pytest.fixture(scope="module")
def staged(live_bench):
    return make_router("l2d-staged").fit(live_bench)


def test_a_gflops_budget_of_the_two_stage_cascade_travels_with_its_price_grid(live_bench, staged, tmp_path):
    """Under a GFLOPs budget the artifact follows a price, as the benchmark did: routing the test
    questions in order asks and keeps the same agents, spends the same GFLOPs and says why alike."""
    costs = live_bench.costs(0.05)
    target = float(live_bench.test.agent_gflops.mean())
    decision, result = budget_decision(staged, costs, "gflops", target)
    _, disk = saved(staged, costs, tmp_path, budget=("gflops", target))
    grid = disk.router.deployed_.config["price_grid"]
    assert "log_price" in disk.budget["follower"] and len(grid["beta"]) > 1
    recs = live_bench.test_records
    routed = disk.route_batch([(r.question, r.context) for r in recs], [r.qid for r in recs])
    assert [r["agent_index"] for r in routed] == decision.choice.tolist()
    np.testing.assert_allclose(
        [r["gflops"]["total"] for r in routed], decision.per_query["gflops"], rtol=1e-6
    )
    assert abs(result.test_gflops - target) <= 0.1 * target
    # explained as the benchmark explains it: the threshold at the price in force, not "at these costs"
    notes = [r["compared"]["note"] for r in routed]
    assert notes == [decision.explain(i, disk.agent_ids)["note"] for i in range(len(routed))]
    assert any("at the price λ in force" in n for n in notes)


def test_a_saved_price_grid_is_checked_at_load_and_routes_on_its_own_range(
    live_bench, staged, tmp_path, monkeypatch
):
    """A damaged price grid is refused when the artifact is loaded, naming the field (before, it
    failed on the first query); the saved grid carries its range, so a later change of the
    module's price range does not move an exported router's decisions."""
    import l2d_core.routers.budget as budget

    costs, target = live_bench.costs(0.05), float(live_bench.test.agent_gflops.mean())
    decision, _ = budget_decision(staged, costs, "gflops", target)
    folder = deploy(staged, costs, ("gflops", target)).save(tmp_path / "artifact")
    manifest = json.loads((folder / "router.json").read_text())
    grid = manifest["config"]["price_grid"]
    assert grid["range"] == list(budget.PRICE_RANGE)
    damaged = [
        ("threshold", grid["threshold"][:-1], "thresholds but"),
        ("beta", [[float("nan")], *grid["beta"][1:]], "price_grid.beta"),
        ("beta", [[0.1, 0.2]] * len(grid["beta"]), "a row of 2 values for the 1 expert"),
        ("range", [1.0, 0.5], "does not run from a lower to a higher price"),
    ]
    for key, value, words in damaged:
        bad = json.loads(json.dumps(manifest))
        bad["config"]["price_grid"][key] = value
        (folder / "router.json").write_text(json.dumps(bad))
        with pytest.raises(ArtifactError, match=words):
            load_router(folder)
    bad = json.loads(json.dumps(manifest))
    del bad["config"]["price_grid"]
    (folder / "router.json").write_text(json.dumps(bad))
    with pytest.raises(ArtifactError, match="config.price_grid: missing"):
        load_router(folder)
    (folder / "router.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(budget, "PRICE_RANGE", (1e-2, 1e2))  # a later version's range
    recs = live_bench.test_records
    routed = load_router(folder).route_batch([(r.question, r.context) for r in recs], [r.qid for r in recs])
    assert [r["agent_index"] for r in routed] == decision.choice.tolist()


def test_saved_two_stage_cascade_reproduces_the_benchmark_decisions(live_bench, staged, tmp_path):
    costs = CostConfig((1.0,), (0.1,))
    _, disk = saved(staged, costs, tmp_path)
    saved_threshold = disk.router.deployed_.config["threshold"]
    assert saved_threshold == staged.threshold(costs) and disk.needs.ask == "bert-ens"
    recs = live_bench.test_records
    routed = disk.route_batch([(r.question, r.context) for r in recs], [r.qid for r in recs])
    d = staged.decide(costs)
    assert [r["agent_index"] for r in routed] == d.choice.tolist()
    asked = np.array([r["signals"]["asked"]["asked"] for r in routed])
    np.testing.assert_array_equal(asked, d.per_query["share"].astype(bool))
    np.testing.assert_allclose([r["gflops"]["total"] for r in routed], d.per_query["gflops"], rtol=1e-6)
    np.testing.assert_allclose(
        [[r["chance_wrong"][a]["start"] for a in disk.agent_ids] for r in routed], d.scores[:, 0], atol=1e-6
    )


@pytest.mark.parametrize("share", [0.0, 1.0])
def test_two_stage_cascade_on_new_text_names_the_expert_it_would_ask(live_bench, staged, share, tmp_path):
    """Under a budget that asks nobody the main answer is kept; one that asks everybody asks
    bert-ens, which cannot answer new text: the decision says so and stops there."""
    _, disk = saved(staged, live_bench.costs(0.05), tmp_path, budget=("share", share))
    r = disk.answer("Who wrote Moby-Dick?", CONTEXT)
    asked = r["signals"]["asked"]
    assert asked["agent"] == "bert-ens" and asked["asked"] == (share == 1.0)
    assert (asked["doubt"] > asked["threshold"]) == asked["asked"]
    bert = disk.specs["bert-ens"].gflops
    if share == 0.0:
        assert r["agent"] == "tiny-live" and r["answer"]["status"] == "ran" and asked["note"] is None
        assert r["gflops"]["asked"] == 0.0 and r["gflops"]["total"] == pytest.approx(r["gflops"]["router"])
    else:
        assert r["agent"] == "bert-ens" and r["answer"]["status"] == "cannot_answer"
        assert "would ask bert-ens" in asked["note"] and "prediction file" in asked["note"]
        # bert-ens never ran: nothing is paid for it (the page says what it would have cost)
        assert r["gflops"]["asked"] == 0.0 and r["gflops"]["chosen_agent"] == 0.0 and bert > 0
        assert r["gflops"]["total"] == pytest.approx(r["gflops"]["router"])
        shown = {k: v for k, v in r["compared"]["values"].items() if v is not None}
        assert r["compared"]["step"] == "first stage" and shown["bert-ens"] == min(shown.values())
