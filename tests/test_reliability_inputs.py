"""Issue 26, "Nothing lost, no traceback": deeply nested JSON, one huge answer, budget flags out
of range and edited dataset files each end in one line for the user (CLI and page), and nothing
already computed is lost."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from collections import Counter

import bench_budgets
import evaluate
import export_router
import import_predictions as import_script
import pytest
import serve
from _pages import open_page

from l2d_core.agents import AgentSpec, add_agent_from_upload, import_predictions, read_prediction_file
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.catalog import user_registry_path
from l2d_core.agents.outcome_log import read_outcome_log
from l2d_core.app_logic.cost_settings import cost_from_upload
from l2d_core.data import DataFormatError, load_dataset, load_squad_json
from l2d_core.data.checksums import ACCEPT_ENV, DatasetChecksumError, file_sha256, known_files
from l2d_core.data.safe_json import MAX_DEPTH, JSONNestingError, check_nesting, loads, nesting_depth
from l2d_core.deploy.artifact import ArtifactError, read_manifest
from l2d_core.method.costs import InvalidCostError
from l2d_core.qa.positions import ContextIndex, locate
from l2d_core.qa.scoring import gold_index, score_answer
from l2d_core.qa.squad_eval import f1, normalize_answer
from pages.ui.widgets import user_message

DEEP = "[" * 100_000 + "]" * 100_000  # 200 KB: a RecursionError for the plain parser


def one_line(text: str) -> bool:
    return "\n" not in text.strip() and "Traceback" not in text and "Recursion" not in text


# ------------------------------------------------------------------- 3. deeply nested JSON
def true_depth(doc) -> int:
    if isinstance(doc, list):
        return 1 + max(map(true_depth, doc), default=0)
    if isinstance(doc, dict):
        return 1 + max(map(true_depth, doc.values()), default=0)
    return 0


@pytest.mark.parametrize(
    "doc",
    [
        {},
        "plain",
        {"q1": "an answer with [brackets] and {braces"},
        {"q1": 'a quote " then [[[', "q2": "\\", "q3": ["x", {"y": [1, 2]}]},
        [[[["]]]]"]]], {'\\"[': [[[[[]]]]]}],
        {"a": "\u00e9\u4e2d[", "b": [[["\\\\"]]], "c": '\\\\"'},
    ],
)
def test_the_depth_scan_agrees_with_the_parser(doc):
    text = json.dumps(doc, ensure_ascii=False)
    assert nesting_depth(text) == true_depth(json.loads(text))
    assert nesting_depth(text.encode("utf-8")) == true_depth(doc)


def test_nesting_is_refused_past_the_bound_and_accepted_up_to_it():
    at_bound = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert true_depth(loads(at_bound)) == MAX_DEPTH
    with pytest.raises(JSONNestingError, match=f"more than {MAX_DEPTH} levels deep"):
        loads("[" + at_bound + "]")
    with pytest.raises(JSONNestingError):
        check_nesting(DEEP.encode())
    # brackets inside strings do not nest: a long run of them in an answer is fine
    assert loads(json.dumps({"q": "[" * 100_000})) == {"q": "[" * 100_000}


def test_a_deep_prediction_file_is_one_line_on_the_cli(fresh_cache, real_data, tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    argv = ["--file", str(path), "--agent", "deep-agent", "--gflops", "1"]
    rc = import_script.main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and one_line(err), err
    assert f"holds arrays or objects nested more than {MAX_DEPTH} levels deep" in err
    assert not user_registry_path().exists() or "deep-agent" not in user_registry_path().read_text()


def test_a_deep_upload_is_one_line_for_the_page_and_keeps_nothing(fresh_cache, real_data):
    small = load_dataset("squad11").by_titles(load_dataset("squad11").titles[:1])
    with pytest.raises(DataFormatError) as exc:
        add_agent_from_upload("deep", small, DEEP.encode(), 1.0, filename="deep.json")
    shown = user_message(exc.value)
    assert one_line(shown) and shown.startswith("prediction file deep.json holds arrays"), shown
    assert str(fresh_cache) not in shown and ".part" not in shown and "Error" not in shown
    assert not list((fresh_cache / "uploads").glob("*")), "nothing of the refused file is kept"


def test_deep_json_is_refused_wherever_a_user_file_is_read(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    with pytest.raises(DataFormatError, match="prediction file deep.json holds arrays"):
        read_prediction_file(path, label="deep.json")
    with pytest.raises(DataFormatError, match="SQuAD file deep.json holds arrays"):
        load_squad_json(path, label="deep.json")
    with pytest.raises(InvalidCostError, match="this file holds arrays or objects nested") as exc:
        cost_from_upload(DEEP.encode(), 2)
    assert one_line(str(exc.value))
    log = tmp_path / "deep.jsonl"
    log.write_text('{"id": "q1", "exact_match": 1}\n' + DEEP + "\n")
    spec = AgentSpec(id="log", dataset="squad11", kind="outcome_log", path=str(log))
    with pytest.raises(DataFormatError, match=r"deep.jsonl: line 2 cannot be read \(arrays or objects"):
        read_outcome_log(spec, None, log)
    (tmp_path / "router").mkdir()
    (tmp_path / "router" / "router.json").write_text(DEEP)
    with pytest.raises(ArtifactError, match="nested more than"):
        read_manifest(tmp_path / "router")


# ------------------------------------------------------------------- 4. one huge answer
@pytest.fixture(scope="module")
def gold(real_data):
    return gold_index(load_dataset("squad11"))


def official_f1(prediction: str, gold_answer: str) -> float:
    """The official SQuAD v1.1 script's f1_score."""
    p, g = normalize_answer(prediction).split(), normalize_answer(gold_answer).split()
    common = Counter(p) & Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def _median_seconds(fn, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def test_a_two_million_word_answer_is_scored_in_linear_time(gold):
    """Scoring grows linearly with an answer's length: ten times the words take about ten times
    as long (quadratic scoring took a hundred times; the ratio of medians is checked, not a
    machine's absolute time)."""
    qid = gold.dataset.qids[0]  # Super Bowl 50: gold answers "Denver Broncos" (x3)
    answer = " ".join(["Denver Broncos"] * 1_000_000)  # 2,000,000 words, 15 MB
    small = " ".join(["Denver Broncos"] * 100_000)
    ratio = _median_seconds(lambda: score_answer(gold, qid, answer)) / _median_seconds(
        lambda: score_answer(gold, qid, small)
    )
    assert ratio < 35, f"10x the words took {ratio:.0f}x the time"
    rec = score_answer(gold, qid, answer)
    assert rec["status"] == "not_found" and rec["em"] == 0.0
    precision = 2 / 2_000_000
    assert rec["f1"] == pytest.approx(2 * precision / (precision + 1), rel=1e-12)
    assert rec["answer"] == answer  # kept as given


def test_a_huge_answer_file_imports_whole(fresh_cache, gold, tmp_path):
    ds = gold.dataset
    preds = {q: ds[q].answers[0] for q in ds.qids[:200]}
    preds[ds.qids[0]] = " ".join(["word"] * 2_000_000)
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(preds))
    assert 10e6 < path.stat().st_size < 200e6
    spec = AgentSpec(id="huge", dataset="squad11", kind="prediction_file", gflops=1.0, path=str(path))
    report = import_predictions(spec, ds, AgentCache(), path)  # (linear scoring: see above)
    assert report.answered == 200 and report.em == pytest.approx(100 * 199 / len(ds))


def test_long_answers_keep_their_scores(gold):
    """The guard on the substring search changes nothing an answer can match; F1 stays the
    official one (same prediction tokens counted once for all gold answers)."""
    ctx = "The Denver Broncos beat the Carolina Panthers."
    idx = ContextIndex.build(ctx)
    assert locate("enver Bronc", idx, context=ctx).status == "substring"
    assert locate(ctx + " and more", idx, context=ctx).status == "not_found"
    ds = gold.dataset
    for r in list(ds)[:400]:
        pred = " ".join([r.answers[0], r.question, r.answers[-1]])
        assert f1(pred, r.answers) == max(official_f1(pred, g) for g in r.answers)


# ------------------------------------------------------------------- 10. budget flags
BAD_FLAGS = [
    (["--budget-share", "7"], "a share of expert calls is between 0 and 1, got 7"),
    (["--budget-share", "-0.1"], "between 0 and 1"),
    (["--budget-share", "nan"], "finite"),
    (["--budget-gflops", "-5"], "> 0, got -5"),
    (["--budget-gflops", "nan"], "finite"),
    (["--budget-gflops", "inf"], "finite"),
]


@pytest.mark.parametrize("script", [evaluate, export_router, serve])
@pytest.mark.parametrize("flags, message", BAD_FLAGS)
def test_budget_flags_are_checked_as_they_are_parsed(script, flags, message, capsys):
    base = {evaluate: [], export_router: ["--pool", "P3", "--out", "x"], serve: ["--pool", "P3"]}[script]
    with pytest.raises(SystemExit) as exc:
        script.parse_args([*base, *flags])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and f"error: argument {flags[0]}: " in err and message in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("script", [evaluate, serve])
def test_budgets_in_range_are_accepted(script):
    base = ["--pool", "P3"] if script is serve else []
    assert script.parse_args([*base, "--budget-share", "1"]).budget_share == 1.0
    assert script.parse_args([*base, "--budget-share", "0"]).budget_share == 0.0
    assert script.parse_args([*base, "--budget-gflops", "12.5"]).budget_gflops == 12.5


def test_the_budget_benchmark_checks_its_targets(capsys):
    for flags in (["--shares", "0.2", "7"], ["--gflops", "nan"], ["--gflops", "-1"]):
        with pytest.raises(SystemExit):
            bench_budgets.parse_args(flags)
        assert f"argument {flags[0]}" in capsys.readouterr().err
    assert bench_budgets.parse_args(["--shares", "0", "1"]).shares == [0.0, 1.0]


# ------------------------------------------------------------------- 11. edited dataset files
@pytest.fixture
def data_copy(real_data, tmp_path, monkeypatch):
    """A data dir of the test's own holding a copy of the official v1.1 dev set."""
    root = tmp_path / "data"
    (root / "squad").mkdir(parents=True)
    shutil.copy(real_data / "squad" / "dev-v1.1.json", root / "squad" / "dev-v1.1.json")
    monkeypatch.setenv("L2D_DATA_DIR", str(root))
    monkeypatch.delenv(ACCEPT_ENV, raising=False)
    return root / "squad" / "dev-v1.1.json"


def test_the_recorded_checksums_are_those_of_the_shared_files(real_data):
    known = known_files()
    for rel in ("squad/dev-v1.1.json", "squad/derived/dev-v2.0.explorer-derived.json"):
        assert file_sha256(real_data / rel) == known[rel].sha256
        assert (real_data / rel).stat().st_size == known[rel].bytes
    assert "squad/dev-v2.0.json" in known  # the official v2.0 file, when downloaded


def test_an_untouched_copy_loads(data_copy):
    assert len(load_dataset("squad11")) == 10_570


def edit(path, old: str, new: str) -> None:
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")


def test_a_changed_version_is_refused_in_one_line(data_copy):
    text = data_copy.read_text(encoding="utf-8")
    data_copy.write_text(text.replace('"version": "1.1"', '"version": "1.2"', 1), encoding="utf-8")
    with pytest.raises(DatasetChecksumError) as exc:
        load_dataset("squad11")
    shown = user_message(exc.value)
    assert one_line(shown) and str(data_copy.parent) not in shown, shown
    assert "squad/dev-v1.1.json" in shown and "scripts/download_data.py" in shown and ACCEPT_ENV in shown


def test_an_edited_gold_answer_of_the_same_size_is_refused(data_copy, monkeypatch):
    text = data_copy.read_text(encoding="utf-8")
    edited = text.replace('"text": "Denver Broncos"', '"text": "Denver Bronkos"', 1)
    assert edited != text and len(edited) == len(text)
    data_copy.write_text(edited, encoding="utf-8")
    with pytest.raises(DatasetChecksumError, match="sha256 .*, expected 95aa6a52d5d6"):
        load_dataset("squad11")
    monkeypatch.setenv(ACCEPT_ENV, "1")  # a modified copy, used knowingly
    assert "Denver Bronkos" in load_dataset("squad11")[load_dataset("squad11").qids[0]].answers


def test_an_edited_dataset_is_one_line_on_the_cli(data_copy, fresh_cache, tmp_path, capsys):
    edit(data_copy, "Broncos", "Bronkos")
    preds = tmp_path / "p.json"
    preds.write_text('{"56be4db0acb8001400a502ec": "Denver Broncos"}')
    rc = import_script.main(["--file", str(preds), "--agent", "mine", "--gflops", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and one_line(err) and "is not the known SQuAD v1.1 dev set" in err, err


def test_a_file_is_hashed_once_per_size_and_modification_time(tmp_path):
    path = tmp_path / "f.json"
    path.write_bytes(b"a" * 1000)
    first = file_sha256(path)
    stamp = path.stat().st_mtime_ns
    path.write_bytes(b"b" * 1000)
    os.utime(path, ns=(stamp, stamp))  # same size and time: the memo answers, no rehash
    assert file_sha256(path) == first
    os.utime(path, ns=(stamp + 10**9, stamp + 10**9))
    assert file_sha256(path) != first


# ------------------------------------------------------------------- the same on the pages
def page_errors(at) -> list[str]:
    assert not at.exception, [e.value for e in at.exception]
    return [e.value for e in at.error]


def test_a_deep_prediction_upload_is_one_line_on_the_overview(real_data, fresh_cache):
    at = open_page("overview", pool="P3").run()
    at.file_uploader(key="agent_upload_0").set_value(("deep.json", DEEP.encode(), "application/json"))
    at.text_input(key="agent_upload_id").set_value("deep-agent")
    errors = page_errors(at.button(key="agent_upload_add").click().run())
    assert len(errors) == 1 and one_line(errors[0]), errors
    assert errors[0].startswith("prediction file deep.json holds arrays or objects nested more than")
    assert str(fresh_cache) not in errors[0]


@pytest.mark.slow  # the cost explorer prepares the P3 benchmark (a minute when not yet cached)
def test_a_deep_cost_file_is_one_line_on_the_cost_explorer(real_data):
    at = open_page("cost_explorer", pool="P3").run()
    at.file_uploader(key="cost_upload").set_value(("costs.json", DEEP.encode(), "application/json"))
    errors = page_errors(at.run())
    assert len(errors) == 1 and one_line(errors[0]) and "costs.json" in errors[0], errors
    assert "nested more than 64 levels deep" in errors[0] and "Error" not in errors[0]


def test_an_edited_dataset_is_one_line_on_the_overview(data_copy):
    edit(data_copy, "Broncos", "Bronkos")
    errors = page_errors(open_page("overview", pool="P3").run())
    assert len(errors) == 1 and one_line(errors[0]), errors
    assert "squad/dev-v1.1.json in the data directory is not the known" in errors[0]
    assert str(data_copy.parent) not in errors[0]
