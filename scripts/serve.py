"""Serve a router over HTTP: a JSON routing API (FastAPI + uvicorn, OpenAPI docs at /docs).

    python scripts/serve.py --router cache/exports/p3live              # a saved artifact
    python scripts/serve.py --pool P3-live                             # the pool's best router, λ = 0.1
    python scripts/serve.py --pool P3-live --router-id l2d-cascade --budget-share 0.2 --port 8000
    python scripts/serve.py --router PATH --workers 2                  # two processes

    curl -s localhost:8000/v1/route -H 'content-type: application/json' \
        -d '{"question": "Who wrote Moby-Dick?", "context": "Moby-Dick is a novel by Herman Melville."}'

Endpoints: POST /v1/route and /v1/answer (one query object or a list of them), GET /v1/agents,
GET /healthz. With --pool, the router is exported to <cache>/exports/ first (trained heads are
reused from the cache) and that artifact is served. Each worker process loads the artifact and
gets an equal share of the CPU threads (--threads to set them).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

import _bootstrap  # noqa: F401
import export_router

from l2d_core.cli import add_cost_arguments
from l2d_core.deploy import ArtifactError, load_router
from l2d_core.deploy.api import ROUTER_ENV, THREADS_ENV
from l2d_core.paths import cache_dir


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--router", type=Path, help="a router artifact folder (scripts/export_router.py)")
    where.add_argument("--pool", help="export this pool's router first (see --router-id and the cost flags)")
    p.add_argument("--router-id", help="with --pool: the router id (default: the best by validation)")
    add_cost_arguments(p, beta1_default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    p.add_argument("--threads", type=int, help="torch threads per worker (default: cores / workers)")
    p.add_argument("--log-level", default="info")
    return p.parse_args(argv)


def artifact_for(args) -> Path:
    """The artifact to serve: ``--router``, or the pool's router exported under <cache>/exports/."""
    if args.router is not None:
        return args.router
    key = repr([args.pool, args.router_id, args.beta1, args.price, args.beta, args.alpha, args.budget_share,
                args.budget_gflops])  # fmt: skip
    out = cache_dir() / "exports" / f"{args.pool}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    if not (out / "router.json").is_file():
        flags = {**vars(args), "router": args.router_id, "out": out, "seed": 0, "quiet": True}
        export_router.export(argparse.Namespace(**flags))
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        path = artifact_for(args)
        router = load_router(path)  # checked here, once, before any worker starts
    except (ArtifactError, KeyError, ValueError, FileNotFoundError, LookupError) as exc:
        print(f"error: {str(exc).strip(chr(39))}", file=sys.stderr)
        return 2
    d = router.describe()
    print(
        f"serving {d['router']['id']} for pool {d['pool']} from {path} on http://{args.host}:{args.port}/docs"
    )
    if not d["routes_new_text"]:
        print("note: this router reads agents known only by their prediction files: new text gets a 422")
    threads = args.threads or max(1, (os.cpu_count() or 1) // max(1, args.workers))
    os.environ[ROUTER_ENV] = str(Path(path).resolve())
    os.environ[THREADS_ENV] = str(threads)
    import uvicorn

    uvicorn.run(
        "l2d_core.deploy.api:app_from_env",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=args.log_level,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
