"""Issue 38 item 12: a tampered artifact is refused with one line before it serves — facts written
twice that disagree (costs, dataset, budget target), fields out of range (a budget target of 7,
lo > hi), the main agent's fingerprint deleted, needs.embeddings without an encoder, and weights
that are not a regular file (a FIFO hung serve.py) or over the size cap."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from _serving import cascade_artifact

from l2d_core.deploy import ArtifactError, deploy, integrity, load_router
from l2d_core.method.costs import CostConfig
from l2d_core.routers.registry import make_router


@pytest.fixture(scope="module")
def artifact(live_bench, tmp_path_factory):
    return cascade_artifact(live_bench, tmp_path_factory.mktemp("integrity"))


@pytest.fixture(scope="module")
def budget_artifact(live_bench, tmp_path_factory):
    router = make_router("l2d-cascade").fit(live_bench)
    return deploy(router, CostConfig((1.0,), (0.3,)), ("share", 0.3)).save(tmp_path_factory.mktemp("b") / "r")


def edited(artifact, tmp_path, change):
    folder = tmp_path / "edited"
    shutil.copytree(artifact, folder)
    manifest = json.loads((folder / "router.json").read_text())
    change(manifest)
    (folder / "router.json").write_text(json.dumps(manifest))
    return folder


FOLLOWER = {"threshold": 0.1, "target": 0.3, "step": 0.05, "lo": -5.0, "hi": 5.0}
EDITS = [
    ("costs-disagree", lambda m: m["costs"].update(beta=[5.0]), "config.costs"),
    ("other-dataset", lambda m: m.update(dataset="squad20"), "pool.dataset: 'squad11', but the router"),
    ("unknown-dataset", lambda m: m.update(dataset="nope"), "dataset: 'nope' is not a dataset"),
    ("fingerprint-deleted", lambda m: m["config"].pop("main_fingerprint"), "fingerprint: Field required"),
    ("embeddings-without-encoder", lambda m: m["needs"].update(embeddings=True), "config.encoder: missing"),
    ("budget-target-7", lambda m: m.update(budget={"kind": "share", "target": 7.0}), "7.0 is not a share"),
    ("follower-lo-above-hi", lambda m: m["config"].update(follower={**FOLLOWER, "lo": 5.0, "hi": -5.0}),
     "lo 5.0 is above hi -5.0"),
    ("follower-share-7", lambda m: m["config"].update(follower={**FOLLOWER, "target": 7.0}),
     "target 7.0 is not a share"),
]  # fmt: skip


@pytest.mark.parametrize("change, words", [e[1:] for e in EDITS], ids=[e[0] for e in EDITS])
def test_a_tampered_manifest_is_refused_in_one_line(artifact, tmp_path, capsys, change, words):
    import serve

    folder = edited(artifact, tmp_path, change)
    with pytest.raises(ArtifactError) as err:
        load_router(folder)
    said = str(err.value)
    assert words in said and "router.json" in said and "\n" not in said, said
    assert serve.main(["--router", str(folder)]) == 2
    out, errors = capsys.readouterr()
    assert "serving" not in out and "Traceback" not in errors and words in errors


def test_a_budget_whose_copies_disagree_is_refused_and_an_exported_one_loads(budget_artifact, tmp_path):
    router = load_router(budget_artifact)  # as exported: the budget and its follower agree
    assert router.budget["target"] == 0.3
    folder = edited(budget_artifact, tmp_path, lambda m: m["budget"].update(target=0.9))
    with pytest.raises(ArtifactError, match="config.follower.target 0.3 and budget.target 0.9 disagree"):
        load_router(folder)


@pytest.mark.timeout(60)
def test_weights_that_are_a_fifo_are_refused_not_read(artifact, tmp_path, capsys):
    import serve

    folder = edited(artifact, tmp_path, lambda m: None)
    weights = folder / "estimator" / "model.safetensors"
    weights.unlink()
    os.mkfifo(weights)
    with pytest.raises(
        ArtifactError, match=r"estimator/model.safetensors is damaged .*: it is not a regular file"
    ):
        load_router(folder)
    assert serve.main(["--router", str(folder)]) == 2  # returns: it never opens the FIFO
    assert "not a regular file" in capsys.readouterr().err


@pytest.mark.timeout(60)
def test_a_router_json_that_is_a_fifo_or_weights_over_the_cap_are_refused(artifact, tmp_path, monkeypatch):
    folder = edited(artifact, tmp_path, lambda m: None)
    monkeypatch.setattr(integrity, "MAX_ARTIFACT_FILE_BYTES", 100)
    with pytest.raises(ArtifactError, match=r"estimator/.* the limit is 100"):
        load_router(folder)
    monkeypatch.undo()
    (folder / "router.json").unlink()
    os.mkfifo(folder / "router.json")
    with pytest.raises(ArtifactError, match="router.json cannot be read: it is not a regular file"):
        load_router(folder)
