"""A router is one class in one home: its saved settings are its own pydantic model, its
capabilities are the methods it has, and no code outside the registry and the routers' own modules
branches on a router's id (the report and the comparison read ``family`` and ``role``). Pure
checks: no data is read."""

from __future__ import annotations

import ast
import inspect
import math
from pathlib import Path

import pytest

from l2d_core.deploy import schema
from l2d_core.evaluation.paired import paired_differences
from l2d_core.evaluation.paper import paper_baselines
from l2d_core.report.frames import our_routers, router_colors
from l2d_core.routers import base, registry
from l2d_core.routers.conf_threshold import ConfThresholdConfig
from l2d_core.routers.saved import SavedConfig
from l2d_core.routers.staged import StagedConfig

ROOT = Path(__file__).resolve().parent.parent
ROUTERS_DIR = ROOT / "l2d_core" / "routers"  # the registry and the routers' own modules
# (file, word): a word that is a router's id by coincidence — AIQ's ``left="zero"`` is the mode that
# counts quality 0 left of a router's first point, not the zero router
NOT_IDS = {("metrics.py", "zero")}


def code_files() -> list[Path]:
    """Every Python file of the package outside the routers, the scripts, the pages and the app."""
    files = [p for p in (ROOT / "l2d_core").rglob("*.py") if ROUTERS_DIR not in p.parents]
    return sorted(
        files + [*(ROOT / "scripts").glob("*.py"), *(ROOT / "pages").rglob("*.py"), ROOT / "app.py"]
    )


def literal_id_branches(path: Path, ids: set[str]) -> list[str]:
    """Where ``path`` compares with, indexes by or looks up a literal router id (or tests the
    ``l2d-`` prefix): ``file:line: what``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    prefixes = {registry.OURS_PREFIX}
    # module-level names of ids (``PAPER_BASELINES = ("r-prob", …)``, ``REFERENCE = "l2d-sdl"``,
    # a dict keyed by ids) count as the ids they hold
    named: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            value = node.value
            elts = value.elts if isinstance(value, (ast.Tuple, ast.List, ast.Set)) else [value]
            elts = value.keys if isinstance(value, ast.Dict) else elts  # ids as keys: colours by id
            held = [e.value for e in elts if isinstance(e, ast.Constant) and e.value in ids]
            for target in node.targets:
                if held and isinstance(target, ast.Name):
                    named[target.id] = held

    def literal_ids(node) -> list[str]:
        if isinstance(node, ast.Constant) and node.value in ids:
            return [node.value]
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return [x for e in node.elts for x in literal_ids(e)]
        if isinstance(node, ast.Name):
            return named.get(node.id, [])
        return []

    hits = []
    for node in ast.walk(tree):
        found = []
        if isinstance(node, ast.Compare):
            found = [x for n in (node.left, *node.comparators) for x in literal_ids(n)]
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            found = literal_ids(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            arg = node.args[0]
            if node.func.attr in ("get", "pop"):
                found = literal_ids(arg)
            elif node.func.attr in ("startswith", "endswith"):
                const = arg.value if isinstance(arg, ast.Constant) else None
                name = arg.id if isinstance(arg, ast.Name) else None
                if const in prefixes or const in ids or name in ("OURS_PREFIX", "L2D_PREFIX"):
                    found = [const or name]
        hits += [f"{path.name}:{node.lineno}: {x}" for x in found if (path.name, x) not in NOT_IDS]
    return hits


def test_no_code_outside_the_routers_branches_on_a_literal_router_id():
    ids = set(registry.router_ids(on_request=True))
    hits = [h for path in code_files() for h in literal_id_branches(path, ids)]
    assert not hits, "\n".join(hits)


def test_the_scan_sees_a_branch_on_a_literal_id(tmp_path):
    """The scan itself: each way of branching on an id that the code used to have is found."""
    src = tmp_path / "branches.py"
    src.write_text(
        'BASELINES = ("r-prob", "r-det")\n'
        'a = rid == "oracle"\n'
        'b = rid in ("random", "zero")\n'
        'c = routers["ensemble"]\n'
        'd = routers.get("zero", {})\n'
        'e = rid.startswith("l2d-")\n'
        "f = [r for r in BASELINES if r in routers]\n"
        "g = rid in BASELINES\n"
        'h = rid == "not-a-router"\n'
        'REF = "l2d-sdl"\n'
        "i = REF if REF in rows else None\n"
        'COLORS = {"oracle": "#000000"}\n'
        "j = rid in COLORS\n",
        encoding="utf-8",
    )
    ids = set(registry.router_ids(on_request=True))
    found = [h.split(": ", 1)[1] for h in literal_id_branches(src, ids)]
    assert found.count("oracle") == 2 and {"random", "zero", "ensemble", "l2d-"} <= set(found)
    assert found.count("r-prob") == 1 and "l2d-sdl" in found and "not-a-router" not in found


def test_capabilities_are_the_methods_a_router_has():
    """No flag repeats a method: ``exportable`` is having ``freeze``, ``supports_budget`` having
    ``calibrate_budget``, ``validated`` having ``oof_outcome`` (the base class has none)."""
    for flag, method in (("exportable", "freeze"), ("supports_budget", "calibrate_budget")):
        assert not hasattr(base.Router, flag) and not hasattr(base.Router, method)
    assert not hasattr(base.Router, "validated") and not hasattr(base.Router, "oof_outcome")
    for rid, cls in registry.routers().items():
        assert registry.exportable(cls) == callable(getattr(cls, "freeze", None)), rid
        assert registry.supports_budget(cls) == callable(getattr(cls, "calibrate_budget", None)), rid
        assert registry.validated(cls) == callable(getattr(cls, "oof_outcome", None)), rid
    assert registry.exportable(registry.router_class("l2d-sdl"))
    assert not registry.exportable(registry.router_class("l2d-sdl-full"))
    assert registry.supports_budget(registry.router_class("l2d-plugin"))
    assert not registry.supports_budget(registry.router_class("knn"))
    ranked = [r for r, c in registry.routers().items() if registry.validated(c)]
    assert {"l2d-plugin", "l2d-staged"} <= set(ranked) and "knn" not in ranked


def test_full_mode_is_a_registered_router_run_only_where_named():
    full = registry.make_router("sdl-full")
    assert full.id == "l2d-sdl-full" and full.mode == "full" and registry.make_router("sdl").mode == "fast"
    assert "l2d-sdl-full" not in registry.router_ids() and "l2d-sdl-full" in registry.router_ids(
        on_request=True
    )
    assert "fine-tunes its own encoder" in full.export_problem()


def test_every_exportable_router_saves_its_own_config_model_from_its_own_home():
    """Each router that freezes declares the model of what it saves in its own module (or its own
    package); the artifact's schema keeps only the envelope, and there is one ``Needs``."""
    for rid, cls in registry.routers().items():
        if not registry.exportable(cls):
            continue
        model = cls.config_model
        assert issubclass(model, SavedConfig) and model is not SavedConfig, rid
        home = cls.__module__.rsplit(".", 1)[0] if cls.__module__.count(".") > 2 else cls.__module__
        assert model.__module__.startswith(home), (rid, model.__module__, home)
    assert schema.Manifest.model_fields["config"].annotation is dict
    assert schema.Manifest.model_fields["needs"].annotation is base.Needs
    own = {n for n, v in vars(schema).items() if inspect.isclass(v) and v.__module__ == schema.__name__}
    assert "FrozenConfig" not in own and "Needs" not in own


@pytest.mark.parametrize("model", [ConfThresholdConfig, StagedConfig])
def test_a_saved_threshold_must_be_a_number(model):
    ok = {
        "costs": {"alpha": [1.0], "beta": [0.3]},
        "agent_gflops": {"a": 1.0, "b": 2.0},
        "agent": 1,
        "asked": "b",
        "set": "base",
        "helpers": [],
        "confidence": True,
        "main_fingerprint": "x",
    }
    assert model.model_validate({**ok, "threshold": math.inf}).threshold == math.inf  # asks nobody
    for bad in ("abc", math.nan):
        with pytest.raises(ValueError, match="threshold"):
            model.model_validate({**ok, "threshold": bad})


def test_the_report_groups_by_family_and_role():
    results = {
        "routers": {
            "l2d-staged": {"aiq": 3.0},
            "knn": {"aiq": 2.0},
            "zero": {"aiq": 1.0},
            "oracle": {"aiq": 5.0},
            "random": {"aiq": 1.5},
        }
    }
    assert our_routers(results) == ["l2d-staged"]
    colors = router_colors(results)
    assert colors["oracle"] == "#000000" and colors["zero"] == "#7f7f7f" and colors["random"] == "#bdbdbd"
    assert paper_baselines(["knn", "r-trans", "r-det", "r-prob"]) == ["r-prob", "r-det", "r-trans"]
    import numpy as np

    s = {r: np.array([v["aiq"]] * 3) for r, v in results["routers"].items()}
    got = paired_differences(results["routers"], {"aiq": s}, level=1.0)
    assert list(got) == ["l2d-staged"] and got["l2d-staged"]["aiq_gain_ci"] == [0.5, 0.5]
