"""The test tiers (tests/_tiers.py) and the cache seeded across runs (tests/_seed_cache.py):
every file has a tier, new files land in the integration tier, unit files ask for no real data,
CI and the README run the unit tier first; the seed's key follows the data and the code, and a
session gives back only builtin agents' imports, never overwriting one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _seed_cache import builtin_agents, content_key, keep, seed
from _tiers import BROWSER_FILES, FIRST, INTEGRATION_FIXTURES, TIERS, UNIT_FILES, misplaced, tier_of

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def test_the_tier_table_names_files_that_exist_and_new_files_are_integration():
    files = {p.name for p in TESTS.glob("test_*.py")}
    assert UNIT_FILES <= files and BROWSER_FILES <= files, (UNIT_FILES | BROWSER_FILES) - files
    assert set(FIRST) <= files and len(set(FIRST)) == len(FIRST), set(FIRST) - files
    assert not set(FIRST) & UNIT_FILES  # the order is for the workers of the integration run
    assert not UNIT_FILES & BROWSER_FILES
    assert {tier_of(f) for f in files} == set(TIERS)
    assert tier_of("test_written_tomorrow.py") == "integration"
    assert misplaced("unit", ["tmp_path", "live_bench"]) == ["live_bench"]


def test_the_longest_files_go_out_first_in_that_order_and_the_rest_keep_theirs():
    from types import SimpleNamespace

    import conftest

    class Item(SimpleNamespace):
        def add_marker(self, mark):
            self.marks.append(mark.name)

    names = ["test_zeta.py", "test_readme.py", "test_alpha.py", "test_app_pages.py", "test_zeta.py"]
    items = [Item(path=TESTS / n, fixturenames=(), marks=[], k=k) for k, n in enumerate(names)]
    conftest.pytest_collection_modifyitems(None, items)
    assert [(i.path.name, i.k) for i in items] == [
        ("test_app_pages.py", 3),
        ("test_readme.py", 1),
        ("test_zeta.py", 0),
        ("test_alpha.py", 2),
        ("test_zeta.py", 4),
    ]
    assert all(i.marks == ["integration"] for i in items)
    config = SimpleNamespace(option=SimpleNamespace(loadscopereorder=True))
    conftest.pytest_configure(config)  # pytest-xdist hands files out in that order, not by size
    assert config.option.loadscopereorder is False


@pytest.mark.parametrize("name", sorted(UNIT_FILES))
def test_unit_files_read_no_real_data_and_start_no_process(name):
    """What collection checks for the fixtures they ask for, checked here in their source too:
    no real-data or model fixture, no subprocess, no page."""
    text = (TESTS / name).read_text(encoding="utf-8")
    if name == Path(__file__).name:
        return  # this file names them to check the others
    used = sorted(f for f in INTEGRATION_FIXTURES if re.search(rf"\b{f}\b", text))
    assert not used, f"{name} uses {used}"
    assert not re.search(r"\bsubprocess\b|\bAppTest\b|\bopen_page\b", text), name


def test_the_tiers_are_registered_and_ci_runs_the_unit_tier_first():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for tier in TIERS:
        assert f'"{tier}: ' in pyproject
    assert re.search(r"^timeout = \d+", pyproject, flags=re.M)  # a per-test limit (pytest-timeout)
    dev = (ROOT / "requirements-dev.txt").read_text(encoding="utf-8")
    assert re.search(r"^pytest-xdist==", dev, flags=re.M) and re.search(r"^pytest-timeout==", dev, flags=re.M)
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and line[0] != "#"][-1]
    unit, rest = ci.index("python -m pytest -m unit"), ci.index("python -m pytest -m 'not unit'")
    assert unit < rest
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert ci in readme and "`python -m pytest -m unit`" in readme


def test_the_seed_key_follows_every_data_file_and_module(tmp_path):
    data, code = tmp_path / "data", tmp_path / "code"
    (data / "squad").mkdir(parents=True)
    (code / "m").mkdir(parents=True)
    (data / "squad" / "a.json").write_text("{}")
    (code / "m" / "x.py").write_text("A = 1\n")
    key = content_key(data, code, ("m",))
    assert key == content_key(data, code, ("m",)) and len(key) == 16
    (code / "m" / "x.py").write_text("A = 2\n")
    changed_code = content_key(data, code, ("m",))
    (data / "squad" / "a.json").write_text('{"x": 1}')
    changed_data = content_key(data, code, ("m",))
    (data / "squad" / "b.json").write_text("{}")
    assert len({key, changed_code, changed_data, content_key(data, code, ("m",))}) == 4


def test_a_session_gives_back_builtin_agents_only_and_never_overwrites(tmp_path):
    folder, first, second = tmp_path / "seed", tmp_path / "s1", tmp_path / "s2"
    for s in (first, second):
        s.mkdir()
    builtin = sorted(builtin_agents())[0]
    seed(first, folder)
    assert (first / "embeddings").resolve() == (folder / "embeddings").resolve()  # shared live
    (first / "agents" / "squad11" / builtin).mkdir(parents=True)
    (first / "agents" / "squad11" / builtin / "cache.db").write_text("first")
    (first / "agents" / "squad11" / "tiny-live").mkdir()  # a test's own model agent: not kept
    assert keep(first, folder) == [f"squad11/{builtin}"]
    seed(second, folder)
    assert (second / "agents" / "squad11" / builtin / "cache.db").read_text() == "first"
    assert not (second / "agents" / "squad11" / "tiny-live").exists()
    (second / "agents" / "squad11" / builtin / "cache.db").write_text("second")
    assert keep(second, folder) == []  # the seed's copy stays as it was
    assert (folder / "agents" / "squad11" / builtin / "cache.db").read_text() == "first"
