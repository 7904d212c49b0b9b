"""The test tiers, assigned centrally (``tests/conftest.py`` marks every test by its file):

- ``unit``: pure functions and small synthetic inputs, no real data, pages or subprocesses
  (``python -m pytest -m unit``: the fast tier, run first);
- ``integration``: the real data, the pages, subprocesses, tiny models — and every file not
  named here, so that a new test file lands in a tier without anyone listing it;
- ``browser``: the dashboard in a real browser.

A unit test that asks for a fixture of the real data or a model (``INTEGRATION_FIXTURES``) is
refused at collection: the table cannot drift from what the tests do."""

from __future__ import annotations

from pathlib import Path

UNIT_FILES = frozenset(
    {
        "test_agent_cache.py",
        "test_architecture.py",
        "test_calibration.py",
        "test_costs_losses.py",
        "test_doctests.py",
        "test_download.py",
        "test_policies_metrics.py",
        "test_rejector.py",
        "test_shipped_memos.py",
        "test_report.py",
        "test_requirements.py",
        "test_squad_eval_positions.py",
        "test_tiers.py",
        "test_training.py",
    }
)
BROWSER_FILES = frozenset({"test_browser.py"})
TIERS = ("unit", "integration", "browser")
# The files that run longest, handed to the pytest-xdist workers first (``--dist loadfile``) so
# that the workers end together; every other file follows in collection order. test_app_pages
# embeds SQuAD v1.1 and test_single_query_comparison waits for those embeddings: the other worker
# runs three long files first, so that it works meanwhile instead of waiting.
FIRST = (
    "test_app_pages.py",
    "test_readme.py",
    "test_browser.py",
    "test_consistency.py",
    "test_single_query_comparison.py",
    "test_serve_floor.py",
    "test_page_words.py",
    "test_llm_pools_pages.py",
    "test_train_agent.py",
    "test_squad_differential.py",
)
INTEGRATION_FIXTURES = frozenset({"real_data", "bert_path", "llama_path", "live_bench"})


def tier_of(path: str | Path) -> str:
    """The tier of a test file, by its name (pure).

    >>> tier_of("tests/test_calibration.py"), tier_of("test_browser.py"), tier_of("test_new.py")
    ('unit', 'browser', 'integration')
    """
    name = Path(path).name
    return "unit" if name in UNIT_FILES else "browser" if name in BROWSER_FILES else "integration"


def start_rank(path: str | Path) -> int:
    """Where a test file starts in a run: its place in :data:`FIRST`, else after them (pure).

    >>> start_rank("tests/test_app_pages.py"), start_rank("test_readme.py")
    (0, 1)
    >>> start_rank("test_written_tomorrow.py") == len(FIRST)
    True
    """
    name = Path(path).name
    return FIRST.index(name) if name in FIRST else len(FIRST)


def misplaced(tier: str, fixtures) -> list[str]:
    """The fixtures a test of ``tier`` may not use (pure).

    >>> misplaced("unit", ["tmp_path", "real_data"]), misplaced("integration", ["real_data"])
    (['real_data'], [])
    """
    return sorted(INTEGRATION_FIXTURES & set(fixtures)) if tier == "unit" else []
