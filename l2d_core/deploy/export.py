"""Export a router from a pool and a cost setting (or budget) in one call: prepare the benchmark,
fit the router on the training articles (stored heads are reused), freeze it, save it."""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from pathlib import Path

from ..evaluation.benchmark import prepare
from ..method.costs import CostConfig
from ..paths import cache_dir
from ..routers.registry import make_router, router_class
from .deployed import DeployedRouter, deploy

__all__ = ["export_router", "export_folder", "zip_folder", "serve_commands"]


def export_router(
    out: str | Path,
    dataset: str,
    pool: str,
    router_id: str,
    costs: CostConfig | None = None,
    price: float | None = None,
    beta1: float | None = None,
    budget: tuple[str, float] | None = None,
    seed: int = 0,
    progress: bool = False,
) -> DeployedRouter:
    """Fit ``router_id`` on ``pool`` (BENCHMARK.md training articles) and save it to ``out`` at
    ``costs``, or at the per-TFLOP price ``price``, or at ``beta1`` by the GFLOPs rule (default:
    the price rule at λ = 0.1, the dashboard's default)."""
    cls = router_class(router_id)
    bench = prepare(
        dataset, pool, progress=progress, features_needed=cls is not None and cls.reads_embeddings
    )
    if costs is None:
        costs = (
            bench.costs(beta1) if beta1 is not None else bench.price_costs(0.1 if price is None else price)
        )
    router = make_router(router_id).fit(bench, seed)
    deployed = deploy(router, costs, budget)
    deployed.save(out)
    return deployed


def export_folder(pool: str, router_id: str, costs: CostConfig, budget=None) -> Path:
    """Where a router of ``pool`` at ``costs`` (and ``budget``) is saved by the dashboard:
    ``<cache>/exports/<pool>-<router>-<hash of the setting>``."""
    key = json.dumps([pool, router_id, list(costs.alpha), list(costs.beta), budget])
    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", f"{pool}-{router_id}")
    return cache_dir() / "exports" / f"{safe}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def zip_folder(folder: str | Path) -> bytes:
    """An artifact folder as zip bytes (for a download button), paths relative to its parent."""
    folder = Path(folder)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(folder.rglob("*")):
            if f.is_file() and not f.name.startswith("."):
                z.write(f, f.relative_to(folder.parent))
    return buf.getvalue()


CURL_EXAMPLE = {"question": "Who wrote Moby-Dick?", "context": "Moby-Dick is a novel by Herman Melville."}


def serve_commands(folder: str | Path, port: int = 8000, qid: str | None = None) -> str:
    """The shell lines that serve an artifact folder and send it one query: new text, or the
    question ``qid`` of its dataset (a router that reads answers recorded in prediction files
    routes those only)."""
    body = {"qid": qid} if qid is not None else CURL_EXAMPLE
    return (
        f"python scripts/serve.py --router {folder} --port {port}\n"
        f"curl -s localhost:{port}/v1/route -H 'content-type: application/json' \\\n"
        f"  -d '{json.dumps(body)}'"
    )
