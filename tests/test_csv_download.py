"""Issue 38 item 8: the "Decisions (CSV)" download escapes every text cell a spreadsheet would run
as a formula (it starts with = + - @, a tab or a carriage return); numbers stay numbers."""

from __future__ import annotations

import csv
import io

import pandas as pd

from l2d_core.app_logic.decisions import FORMULA_START, csv_download
from l2d_core.paths import PROJECT_ROOT


def test_formula_cells_are_escaped_and_numbers_kept():
    hostile = ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1", "Paris", "", "a=b"]
    df = pd.DataFrame(
        {
            "answer bert": hostile,
            "correct": [True] * 9,
            "x": [-1.5] * 9,
            "=evil": pd.array(hostile, dtype="string"),
        }
    )
    rows = list(csv.reader(io.StringIO(csv_download(df), newline="")))
    assert rows[0] == ["answer bert", "correct", "x", "'=evil"]
    for cell in (c for r in rows[1:] for c in (r[0], r[3])):
        assert not cell.startswith(FORMULA_START), cell
    assert [r[0] for r in rows[1:]][-3:] == ["Paris", "", "a=b"]  # the others untouched
    assert rows[1][0] == "'=cmd|' /C calc'!A0" and {r[2] for r in rows[1:]} == {"-1.5"}


def test_the_decisions_page_downloads_through_it():
    page = (PROJECT_ROOT / "pages" / "decisions.py").read_text(encoding="utf-8")
    assert "csv_download(shown)" in page and ".to_csv(" not in page
