"""Our SQuAD v1.1 EM and F1 (l2d_core/qa/squad_eval.py) against an outside implementation,
torchmetrics' SQuAD metric, on every SQuAD v1.1 prediction file in the data directory.

torchmetrics scores one question at a time in Python (about 3.5 s per 10,570-question file on a
2-core CPU), so each distinct (question, answer) pair of all the files is scored once (a third of
the pairs) and a file's figure is the mean over the dataset's questions; one whole file is also
scored by the metric object itself, the one whose ids do not match the dataset, to hold its own
dataset-level averaging (missing ids count 0, unknown ids are ignored). About 45 s in all on a
shared 2-core CPU (25 s of it torchmetrics on 66,596 distinct pairs; a call per file: over 60 s).

torchmetrics keeps its sums in float32 by default (F1 then differs from an exact mean by up to
1e-3 points): here it runs in float64.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager

import pytest
import torch
from torchmetrics.functional.text import squad
from torchmetrics.text import SQuAD

from l2d_core.agents import list_agents, read_prediction_file
from l2d_core.agents.catalog import builtin_agent_ids
from l2d_core.data import load_dataset
from l2d_core.qa.squad_eval import exact_match, f1, normalize_answer, score_answers

TOL = 1e-6  # points (percent)
pytestmark = pytest.mark.slow  # about 45 s: torchmetrics scores in Python, question by question


@contextmanager
def float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def theirs_one(qid: str, answer: str, golds: list[str]) -> tuple[float, float]:
    """torchmetrics' EM and F1 (percent) of one answer to one question."""
    with float64():
        out = squad({"id": qid, "prediction_text": answer}, {"id": qid, "answers": {"text": golds}})
    return out["exact_match"].item(), out["f1"].item()


@pytest.fixture(scope="module")
def squad11(real_data):
    ds = load_dataset("squad11")
    files = sorted((real_data / "predictions" / "squad-v1.1").glob("*.json"))
    golds = {r.qid: list(r.answers) for r in ds}
    preds = {f.name: read_prediction_file(f) for f in files}
    pairs = sorted({(q, a) for p in preds.values() for q, a in p.items() if q in golds})
    theirs = {(q, a): theirs_one(q, a, golds[q]) for q, a in pairs}
    return ds, golds, preds, theirs


def test_every_prediction_file_is_compared(squad11, real_data):
    _, golds, preds, theirs = squad11
    folder = real_data / "predictions" / "squad-v1.1"
    assert preds and set(preds) == {f.name for f in folder.iterdir() if f.suffix == ".json"}
    # the project's own SQuAD v1.1 agents read files from this folder, and all of them are here
    builtin = builtin_agent_ids()  # (a test may have registered its own agent from another folder)
    agent_files = {
        a.resolved_path() for a in list_agents("squad11") if a.kind == "prediction_file" and a.id in builtin
    }
    assert agent_files and agent_files <= {folder / name for name in preds}
    answered = sum(q in golds for p in preds.values() for q in p)
    assert len(golds) < len(theirs) < answered  # distinct pairs: more than one file, fewer than all


def test_every_question_of_every_file_scores_the_same(squad11):
    _, golds, _, theirs = squad11
    differ = [
        (q, a, ours, their)
        for (q, a), their in theirs.items()
        for ours in [(100 * exact_match(a, golds[q]), 100 * f1(a, golds[q]))]
        if abs(ours[0] - their[0]) > TOL or abs(ours[1] - their[1]) > TOL
    ]
    assert not differ, f"{len(differ)} of {len(theirs)} answers score differently, e.g. {differ[:5]}"


def test_dataset_em_and_f1_of_every_file_match(squad11):
    _, golds, preds, theirs = squad11
    differ = {}
    for name, p in preds.items():
        ours = score_answers(p, golds)
        scored = [theirs[q, p[q]] for q in golds if q in p]  # an unanswered question scores 0
        their = {k: sum(s[i] for s in scored) / len(golds) for i, k in enumerate(("exact_match", "f1"))}
        if any(abs(ours[k] - their[k]) > TOL for k in their):
            differ[name] = (ours, their)
    assert not differ, differ


def test_the_metric_itself_averages_a_file_as_we_do(squad11):
    """One whole file through torchmetrics' SQuAD object: the file whose ids differ most from the
    dataset's (unanswered questions and ids the dataset does not have)."""
    ds, golds, preds, _ = squad11
    name, p = max(preds.items(), key=lambda kv: len(set(kv[1]) ^ set(golds)))
    ours = score_answers(p, golds)
    assert ours["missing"] > 0 and set(p) - set(golds), name
    target = [
        {"id": r.qid, "answers": {"text": list(r.answers), "answer_start": list(r.answer_starts)}} for r in ds
    ]
    with float64(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one "Unanswered question" warning per missing id
        metric = SQuAD().set_dtype(torch.float64)
        their = metric([{"id": q, "prediction_text": a} for q, a in p.items()], target)
    for key in ("exact_match", "f1"):
        assert abs(ours[key] - their[key].item()) <= TOL, (name, key, ours[key], their[key].item())


def test_where_torchmetrics_leaves_the_official_v11_script(squad11):
    """A gold answer that normalizes to nothing ('.', three dev questions): the official v1.1
    script gives F1 0 when no token is shared, even two empty answers; torchmetrics gives 1 (its
    SQuAD v2.0 rule). We follow the official script. No prediction file meets this case."""
    _, golds, _, theirs = squad11
    empty = {q: g for q, g in golds.items() if any(not normalize_answer(a) for a in g)}
    assert empty
    for qid, gold in empty.items():
        answer = next(a for a in gold if not normalize_answer(a))
        assert (100 * exact_match(answer, gold), 100 * f1(answer, gold)) == (100.0, 0.0)
        assert theirs_one(qid, answer, gold) == (100.0, 100.0)
        assert all(normalize_answer(a) for q, a in theirs if q == qid)  # not in any file
