"""Record the engine's figures and compare a later run against them (behaviour must not drift).

    python scripts/regression_snapshot.py record  --out reports/regression.json
    python scripts/regression_snapshot.py compare --against reports/regression.json

What it records, through the command-line tools only (so it survives moves inside the package):

- ``evaluate.py --json --sweep`` for pools P2, P3 and P10, policies ``plugin`` and ``sdl``;
- ``benchmark_routers.py --seeds 0 --n-boot 0 --no-png`` (every router, one seed, no
  bootstrap) on P2 and P3: its ``results.json`` without the run's timestamps and timings.

Runs use a fresh cache directory (``--cache``, default a temporary one) so no trained head of an
earlier version is reused; the embeddings of ``L2D_CACHE_DIR`` (default ``cache/``) are copied in
first, since they are not what a refactor changes and take minutes to recompute. ``compare``
exits 1 and lists every number that differs by more than ``--tol`` (absolute, default 1e-9)
and every key of the snapshot the new run lacks; keys only the new run has are listed as notes
(a new field is not a changed figure).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import _bootstrap  # noqa: F401

from l2d_core.paths import cache_dir

ROOT = Path(__file__).resolve().parent.parent
EVAL_POOLS = ("P2", "P3", "P10")
EVAL_POLICIES = ("plugin", "sdl")
COMPARISON_POOLS = ("P2", "P3")
IGNORED_KEYS = frozenset({"created", "run", "timings_s", "compute_s", "command"})


def _run(args: list[str], env: dict) -> str:
    proc = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return proc.stdout


def record(cache: Path, log=print) -> dict:
    """Every figure of the snapshot, computed now in ``cache``."""
    env = dict(os.environ, L2D_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1")
    snap: dict = {"evaluate": {}, "comparison": {}}
    for pool in EVAL_POOLS:
        for policy in EVAL_POLICIES:
            log(f"evaluate.py {pool} {policy} --sweep")
            out = _run(
                ["scripts/evaluate.py", "--pool", pool, "--policy", policy, "--sweep", "--json", "--quiet"],
                env,
            )
            snap["evaluate"][f"{pool}/{policy}"] = json.loads(out)
    for pool in COMPARISON_POOLS:
        log(f"benchmark_routers.py {pool} --seeds 0 --n-boot 0")
        with tempfile.TemporaryDirectory() as out:
            _run(
                [
                    "scripts/benchmark_routers.py",
                    "--pool",
                    pool,
                    "--seeds",
                    "0",
                    "--n-boot",
                    "0",
                    "--no-png",
                    "--quiet",
                    "--out",
                    out,
                ],
                env,
            )
            snap["comparison"][pool] = json.loads((Path(out) / "results.json").read_text())
    return snap


def differences(old, new, tol: float, path: str = "") -> list[str]:
    """Every place where ``new`` differs from ``old``: numbers by more than ``tol`` (absolute),
    other values exactly, keys present on one side only (``IGNORED_KEYS`` are skipped).

    >>> differences({"a": 1.0, "b": [1, 2]}, {"a": 1.0 + 1e-12, "b": [1, 3]}, 1e-9)
    ['b[1]: 2 -> 3']
    >>> differences({"a": 1, "created": "x"}, {"c": 1, "created": "y"}, 1e-9)
    ['a: missing in the new run', 'c: not in the snapshot']
    """
    out: list[str] = []
    if isinstance(old, dict) and isinstance(new, dict):
        for k in old:
            if k in IGNORED_KEYS:
                continue
            if k not in new:
                out.append(f"{path}{k}: missing in the new run")
            else:
                out += differences(old[k], new[k], tol, f"{path}{k}.")
        out += [f"{path}{k}: not in the snapshot" for k in new if k not in old and k not in IGNORED_KEYS]
        return [d.replace(".:", ":").replace(".[", "[") for d in out]
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [f"{path.rstrip('.')}: {len(old)} items -> {len(new)}"]
        for i, (a, b) in enumerate(zip(old, new)):
            out += differences(a, b, tol, f"{path.rstrip('.')}[{i}].")
        return [d.replace(".:", ":") for d in out]
    num = (int, float)
    if isinstance(old, num) and isinstance(new, num) and not isinstance(old, bool):
        same = (math.isnan(old) and math.isnan(new)) or abs(old - new) <= tol or old == new
        return [] if same else [f"{path.rstrip('.')}: {old!r} -> {new!r}"]
    return [] if old == new else [f"{path.rstrip('.')}: {old!r} -> {new!r}"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("record", "compare"))
    p.add_argument(
        "--out", type=Path, help="write this run's snapshot here (record: default reports/regression.json)"
    )
    p.add_argument("--against", type=Path, default=ROOT / "reports" / "regression.json", help="compare")
    p.add_argument("--tol", type=float, default=1e-9)
    p.add_argument("--cache", type=Path, help="cache directory for the runs (default: a fresh temporary one)")
    p.add_argument("--show", type=int, default=40, help="differences printed at most")
    args = p.parse_args(argv)
    if args.action == "compare" and not args.against.is_file():
        print(f"error: no snapshot at {args.against}; run `record` first", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.cache or Path(tmp)
        emb = cache_dir() / "embeddings"
        if emb.is_dir() and not (cache / "embeddings").exists() and emb.resolve() != (cache / "embeddings"):
            shutil.copytree(emb, cache / "embeddings")
        snap = record(cache, log=lambda m: print(m, file=sys.stderr, flush=True))
    out = args.out or (ROOT / "reports" / "regression.json" if args.action == "record" else None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(snap, indent=1, sort_keys=True))
        print(f"wrote {out}")
    if args.action == "record":
        return 0
    found = differences(json.loads(args.against.read_text()), json.loads(json.dumps(snap)), args.tol)
    added = [d for d in found if d.endswith("not in the snapshot")]
    diffs = [d for d in found if d not in added]
    if added:
        fields = sorted({d.split(":")[0].rsplit(".", 1)[-1] for d in added})
        print(f"note: {len(added)} field(s) only in the new run ({', '.join(fields)})")
    if not diffs:
        print(f"snapshot matches {args.against} (tolerance {args.tol:g})")
        return 0
    print(f"{len(diffs)} difference(s) from {args.against} (tolerance {args.tol:g}):")
    for d in diffs[: args.show]:
        print("  " + d)
    return 1


if __name__ == "__main__":
    sys.exit(main())
