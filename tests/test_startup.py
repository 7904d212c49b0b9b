"""Start-up: a command's --help loads neither torch nor scikit-learn nor pandas and reads no data,
and the router registry answers it from its index on disk without importing router modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "sklearn", "pandas", "transformers", "scipy")


def _imported(args: list[str], env_extra: dict, tmp_path) -> tuple[str, set[str]]:
    env = {"PATH": "/usr/bin:/bin", "L2D_CACHE_DIR": str(tmp_path / "cache"), **env_extra}
    out = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    mods = {
        line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")
    }
    return out.stdout, mods


def test_evaluate_help_loads_no_heavy_package_and_reads_no_data(tmp_path):
    missing = {"L2D_DATA_DIR": str(tmp_path / "no-data-here")}
    first, mods = _imported(["scripts/evaluate.py", "--help"], missing, tmp_path)
    assert "l2d-cascade" in first and "conf-threshold" in first  # the registry's routers are listed
    # the first run imported the router modules (scikit-learn with them) to write the index; no
    # router module imports torch before it trains or runs a network
    assert "sklearn" in mods and "torch" not in mods
    again, mods = _imported(["scripts/evaluate.py", "--help"], missing, tmp_path)
    assert again == first
    assert not set(HEAVY) & mods  # the second read the index


def test_the_router_index_follows_the_router_modules(tmp_path):
    """A router module named in L2D_ROUTERS is listed at once (the index's key covers it)."""
    module = tmp_path / "my_router.py"
    module.write_text(
        "from l2d_core.routers.references import ZeroRouter\n"
        "from l2d_core.routers.registry import register\n\n\n"
        "@register\nclass Mine(ZeroRouter):\n    id = 'mine-zero'\n    label = 'mine'\n"
    )
    code = "from l2d_core.routers.registry import router_ids; print(router_ids())"
    before, _ = _imported(["-c", code], {"PYTHONPATH": str(ROOT)}, tmp_path)
    after, _ = _imported(["-c", code], {"PYTHONPATH": str(ROOT), "L2D_ROUTERS": str(module)}, tmp_path)
    assert "mine-zero" not in before and "mine-zero" in after
