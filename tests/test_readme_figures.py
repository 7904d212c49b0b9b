"""Issue 37, item 11: the README quotes no figure by hand. Its figures live in one block that
``scripts/benchmark_routers.py --readme`` (also with ``--report-only``) writes from the saved
results; outside the block no measured time, EM, F1, APGR or AIQ is typed."""

from __future__ import annotations

import re
from pathlib import Path

import benchmark_routers as B
import pytest

from l2d_core.report import targets as T
from l2d_core.report.readme_figures import BLOCK_END, BLOCK_START, figures_markdown, replace_block

README = Path(__file__).resolve().parent.parent / "README.md"
MEASURED = re.compile(
    r"\b\d+(\.\d+)?([–-]\d+)?\s?(s|min|minutes|seconds|hours)\b"  # a time
    r"|\b(EM|F1|APGR|AIQ)\s+[+-]?\d"  # a quality figure
    r"|\d+ beside other jobs"
)


def _outside_block(text: str) -> str:
    head, _, rest = text.partition(BLOCK_START)
    return head + rest.partition(BLOCK_END)[2]


def test_the_readme_types_no_measured_figure_outside_its_generated_block():
    text = README.read_text(encoding="utf-8")
    assert text.count(BLOCK_START) == 1 and text.count(BLOCK_END) == 1
    found = [m.group(0) for m in MEASURED.finditer(_outside_block(text))]
    assert not found, found


def _results(apgr: float) -> dict:
    return {
        "pool": "P2",
        "created": "2026-11-26T17:00:00+00:00",
        "n_test": 3200,
        "seeds": [0, 1],
        "run": {
            "command": "python scripts/benchmark_routers.py --pool P2",
            "compute_s": 600.0,
            "load_avg": [3.5],
        },
        "routers": {
            "l2d-cascade": {
                "validation": {"aiq": 70.0, "price": 0.1},
                "apgr": apgr,
                "apgr_ci": [0.7, 0.9],
                "aiq": 71.0,
            },
            "l2d-staged": {"validation": {"aiq": 60.0, "price": 0.1}, "apgr": 0.95, "aiq": 72.0},
        },
    }


def test_the_block_is_written_from_the_results(tmp_path, monkeypatch):
    monkeypatch.setattr(T, "TARGETS", [{"id": "a", "type": "apgr", "pool": "P2", "min": 0.75}])
    readme = tmp_path / "README.md"
    readme.write_text(README.read_text(encoding="utf-8"), encoding="utf-8")
    runs = {"P2": {"path": tmp_path / "reports" / "squad11-P2" / "results.json", "results": _results(0.8)}}
    B.write_readme(readme, runs)
    text = readme.read_text(encoding="utf-8")
    block = text.partition(BLOCK_START)[2].partition(BLOCK_END)[0]
    # the router chosen on validation (l2d-cascade), not the best on test (l2d-staged), with its figures
    assert "chosen on validation: l2d-cascade, APGR 0.800 [0.700, 0.900]" in block
    assert (
        "**met**" in block and "10.0 min at load 3.5" in block and "reports/squad11-P2/results.json" in block
    )
    assert _outside_block(text) == _outside_block(README.read_text(encoding="utf-8"))  # the rest untouched
    # new results: the block follows them, and writing twice changes nothing
    runs["P2"]["results"] = _results(0.7)
    B.write_readme(readme, runs)
    again = readme.read_text(encoding="utf-8")
    assert "APGR 0.700" in again and "**not met**" in again
    B.write_readme(readme, runs)
    assert readme.read_text(encoding="utf-8") == again


def test_a_readme_without_the_block_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no generated block"):
        replace_block("# a readme", figures_markdown({}))
