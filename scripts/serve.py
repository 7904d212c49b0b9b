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
import errno
import hashlib
import http.client
import os
import socket
import sys
import threading
from pathlib import Path

import _bootstrap  # noqa: F401
import uvicorn
from uvicorn.supervisors import Multiprocess

from l2d_core.cli import add_cost_arguments
from l2d_core.deploy import ArtifactError, load_router
from l2d_core.deploy.api import ROUTER_ENV, THREADS_ENV, create_app
from l2d_core.deploy.server import LOG_LEVELS, server_config
from l2d_core.paths import cache_dir

# seconds a worker process may take to answer uvicorn's first health check: it imports torch and the
# models before it can (uvicorn's 5 s default kills and restarts it forever on a busy machine)
WORKER_STARTUP = 120


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--router", type=Path, help="a router artifact folder (scripts/export_router.py)")
    where.add_argument("--pool", help="export this pool's router first (see --router-id and the cost flags)")
    p.add_argument("--router-id", help="with --pool: the router id (default: the best by validation)")
    add_cost_arguments(p, beta1_default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=port, default=8000, help="1 to 65535, or 0: a free port the system picks")
    p.add_argument("--workers", type=at_least_one, default=1, help="uvicorn worker processes")
    p.add_argument("--threads", type=at_least_one, help="torch threads per worker (default: cores / workers)")
    p.add_argument("--log-level", default="info", choices=LOG_LEVELS, type=str.lower)
    return p.parse_args(argv)


def whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None


def port(text: str) -> int:
    """A TCP port: 1 to 65535, or 0 for one the system picks."""
    n = whole(text)
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"{n} is not a port: give 1 to 65535 (0: any free port)")
    return n


def at_least_one(text: str) -> int:
    n = whole(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n}: give 1 or more")
    return n


def artifact_for(args) -> Path:
    """The artifact to serve: ``--router``, or the pool's router exported under <cache>/exports/."""
    if args.router is not None:
        return args.router
    latency = [args.latency_price] if args.latency_price is not None else []  # older keys stay valid
    latency += [("money", args.money_price)] if args.money_price is not None else []
    key = repr([args.pool, args.router_id, args.beta1, args.price, args.beta, args.alpha, args.budget_share,
                args.budget_gflops, *latency])  # fmt: skip
    out = cache_dir() / "exports" / f"{args.pool}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    if not (out / "router.json").is_file():
        import export_router  # its pools' data and routers: only where no artifact is given

        flags = {**vars(args), "router": args.router_id, "out": out, "seed": 0, "quiet": True}
        export_router.export(argparse.Namespace(**flags))
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    threads = args.threads or max(1, (os.cpu_count() or 1) // max(1, args.workers))
    try:
        path = artifact_for(args)
        router = load_router(path)  # checked here, once, before any worker starts
        router.warm_up(threads)  # routes one query: an artifact that cannot route stops here, not at a user's
    except (ArtifactError, KeyError, ValueError, FileNotFoundError, LookupError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    d = router.describe()
    if not d["routes_new_text"]:
        print("note: this router reads agents known only by their prediction files: new text gets a 422")
    os.environ[ROUTER_ENV] = str(Path(path).resolve())
    os.environ[THREADS_ENV] = str(threads)
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        print(f"error: {cannot_bind(args.host, args.port, exc)}", file=sys.stderr)
        return 2
    bound = sock.getsockname()[1]
    where = f"{d['router']['id']} for pool {d['pool']} from {path}"
    said = announce_when_answering(args.host, bound, f"serving {where} on http://{args.host}:{bound}/docs")
    try:
        if args.workers == 1:  # this process serves the router it has warmed up
            config = uvicorn.Config(**server_config(create_app(router), args.host, bound, args.log_level))
            uvicorn.Server(config).run(sockets=[sock])
        else:  # each worker process loads and warms up its own (l2d_core.deploy.api:app_from_env)
            app = "l2d_core.deploy.api:app_from_env"
            config = uvicorn.Config(
                **server_config(app, args.host, bound, args.log_level, factory=True, workers=args.workers),
                timeout_worker_healthcheck=WORKER_STARTUP,
            )
            Multiprocess(config, sockets=[sock]).run()
    except (OSError, SystemExit) as exc:
        code = getattr(exc, "code", None)
        reason = (
            one_line(exc) if isinstance(exc, OSError) else f"it stopped while starting (exit status {code})"
        )
        print(f"error: the server on {args.host}:{bound} failed: {reason}", file=sys.stderr)
        return 2
    finally:
        said.set()  # stop the watcher if the server never answered
        sock.close()
    return 0


def bind(host: str, port_number: int) -> socket.socket:
    """A TCP socket bound to ``host:port_number`` (0: a free port), inheritable by worker
    processes; it listens once the server starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port_number))
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def cannot_bind(host: str, port_number: int, exc: OSError) -> str:
    """Why ``host:port_number`` cannot be served on, in one sentence.

    >>> import errno
    >>> cannot_bind("127.0.0.1", 8000, OSError(errno.EADDRINUSE, "Address already in use"))
    'port 8000 on 127.0.0.1 is in use (another server?): stop it, or pick another --port (0: a free one)'
    """
    if isinstance(exc, socket.gaierror):
        return f"--host {host!r} is not a name or address this machine can resolve ({exc.strerror})"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port_number} on {host} is in use (another server?): stop it, or pick another "
            "--port (0: a free one)"
        )
    if exc.errno == errno.EACCES:
        return (
            f"port {port_number} on {host} needs privileges this user lacks: pick a port from 1024 up "
            "(0: a free one)"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"--host {host} is not an address of this machine: use 127.0.0.1, 0.0.0.0 or one of its own"
    return f"cannot serve on {host}:{port_number}: {exc.strerror or one_line(exc)}"


def announce_when_answering(host: str, port_number: int, message: str) -> threading.Event:
    """Print ``message`` once ``GET /healthz`` on the port answers 200 (a worker is serving, not
    only a socket bound), from a watcher thread; setting the returned event stops the watcher."""
    stop = threading.Event()
    probe = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)

    def watch() -> None:
        while not stop.is_set():
            conn = http.client.HTTPConnection(probe, port_number, timeout=2)
            try:
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    print(message, flush=True)
                    return
            except OSError:
                pass
            finally:
                conn.close()
            stop.wait(0.02)

    threading.Thread(target=watch, name="announce-serving", daemon=True).start()
    return stop


def one_line(exc: BaseException) -> str:
    """An exception's message on one line, without the quotes a KeyError adds."""
    return " ".join(str(exc).strip(chr(39)).split()) or "no reason given"


if __name__ == "__main__":
    sys.exit(main())
