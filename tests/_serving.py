"""The routing API as the tests serve it: a saved cascade artifact of the tiny live pool, and the
API on a free loopback port with the protocol and timeouts ``scripts/serve.py`` uses."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

from l2d_core.deploy import deploy
from l2d_core.deploy.api import create_app
from l2d_core.deploy.server import server
from l2d_core.method.costs import CostConfig
from l2d_core.routers.registry import make_router


def cascade_artifact(live_bench, folder: Path) -> Path:
    """An ``l2d-cascade`` of the live benchmark at α = 1, β = 0.3, saved under ``folder``."""
    router = make_router("l2d-cascade").fit(live_bench)
    return deploy(router, CostConfig((1.0,), (0.3,))).save(folder / "cascade")


@contextlib.contextmanager
def serving(router):
    """The API of ``router`` served as scripts/serve.py serves it, on a free loopback port; yields
    the port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    srv = server(create_app(router), log_level="warning")
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.started, "the server did not start"
    try:
        yield sock.getsockname()[1]
    finally:
        srv.should_exit = True
        thread.join(10)
        sock.close()
