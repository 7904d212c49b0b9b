"""Run the doctests of every module under ``l2d_core`` (one test per module)."""

from __future__ import annotations

import doctest
import importlib
import io
import pkgutil
import types

import pytest

import l2d_core

OPTIONFLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS


def _module_names() -> list[str]:
    return sorted(
        info.name for info in pkgutil.walk_packages(l2d_core.__path__, prefix=f"{l2d_core.__name__}.")
    )


MODULES = _module_names()


def run_doctests(module: types.ModuleType) -> tuple[int, int, str]:
    """(failed, attempted, report) for the doctests found in ``module``."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS, verbose=False)
    out = io.StringIO()
    for test in finder.find(module, module.__name__):
        runner.run(test, out=out.write)
    res = runner.summarize(verbose=False)
    return res.failed, res.attempted, out.getvalue()


CORE = (
    "qa.squad_eval",
    "qa.positions",
    "method.costs",
    "method.losses",
    "method.policies",
    "evaluation.metrics",
)


def test_modules_are_discovered():
    for name in CORE:
        assert f"l2d_core.{name}" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name):
    module = importlib.import_module(name)
    failed, _attempted, report = run_doctests(module)
    assert failed == 0, f"{failed} doctest example(s) failed in {name}:\n{report}"


def test_core_modules_have_doctests():
    for name in CORE:
        _failed, attempted, _ = run_doctests(importlib.import_module(f"l2d_core.{name}"))
        assert attempted > 0, f"l2d_core.{name} lost its doctests"


def test_runner_detects_a_failing_doctest():
    """The helper must report a wrong example, otherwise the parametrised test is vacuous."""
    mod = types.ModuleType("fake_mod")
    mod.__doc__ = """
    >>> 1 + 1
    3
    >>> [1,   2]
    [1, 2]
    >>> list(range(50))
    [0, 1, ..., 49]
    """
    failed, attempted, report = run_doctests(mod)
    assert (failed, attempted) == (1, 3)
    assert "Expected:" in report and "3" in report
