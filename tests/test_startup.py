"""Start-up: a command's --help loads neither torch nor scikit-learn nor pandas and reads no data,
and the router registry answers it from its index on disk without importing router modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
    # the first run imported the router modules to write the index; no router module imports
    # torch before it trains or runs a network, nor scikit-learn before it fits
    assert (tmp_path / "cache" / "router_index.json").is_file() and not {"torch", "sklearn"} & mods
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


def test_routers_keep_scikit_learns_contract_without_importing_it_and_scale_as_it_does():
    """The routers' estimators keep scikit-learn's contract (``get_params``, ``set_params``,
    ``clone``) without importing it at start-up; a head's scaler is fitted to the bits ``StandardScaler`` fits
    and, loaded, computes exactly what it computes, for float32, float64 and integer rows."""
    import numpy as np
    from sklearn.base import clone
    from sklearn.preprocessing import StandardScaler

    from l2d_core.routers.estimator import NotFittedError, check_fitted
    from l2d_core.routers.posthoc import PosthocRejector
    from l2d_core.routers.scaling import fit_scaler, scaler_from_state, scaler_state

    est = PosthocRejector(calibration="platt", calibration_folds=4)
    twin = clone(est)
    assert twin is not est and twin.get_params() == est.get_params()
    assert est.set_params(calibration_folds=2).calibration_folds == 2
    with pytest.raises(ValueError, match="invalid parameter"):
        est.set_params(nope=1)
    with pytest.raises(NotFittedError, match="fit"):
        check_fitted(est, "head_")
    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 2.0, size=(200, 7)).astype(np.float32)
    X[:, 3] = 1.5  # a constant column: scale 1
    ours, theirs = fit_scaler(X), StandardScaler().fit(X)  # fitted with NumPy: the same bits
    assert np.array_equal(ours.mean_, theirs.mean_) and np.array_equal(ours.scale_, theirs.scale_)
    X[0, 0] = np.nan  # NaN rows: scikit-learn's own code
    assert np.array_equal(fit_scaler(X).scale_, StandardScaler().fit(X).scale_)
    X[0, 0] = 3.0
    ours, theirs = fit_scaler(X), StandardScaler().fit(X)
    loaded = scaler_from_state(scaler_state(ours))
    for rows in (X[:20], X[:20].astype(np.float64), rng.integers(0, 9, size=(5, 7))):
        want = theirs.transform(rows)
        for scaler in (ours, loaded):
            got = scaler.transform(rows)
            assert got.dtype == want.dtype and np.array_equal(got, want)
    with pytest.raises(ValueError, match="7 features"):
        loaded.transform(X[:, :3])


def test_a_first_head_trains_without_importing_torchs_compiler_or_transformers():
    code = (
        "import sys, torch\n"
        "from l2d_core.method.training import TrainConfig, train_loop\n"
        "from l2d_core.routers.network import MLPHead\n"
        "m = MLPHead(4, (2, 2), hidden=4, dropout=0.1)\n"
        "x = torch.randn(32, 4)\n"
        "h = train_loop(m, 32, lambda i: m(x[i]).pow(2).mean(), TrainConfig(epochs=2, batch_size=8))\n"
        "assert len(h['train']) == 2\n"
        "print(sorted(k for k in ('torch._dynamo', 'transformers') if k in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout
