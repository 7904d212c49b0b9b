"""Adding a router is adding one module: a router written in a file of its own, named in
``$L2D_ROUTERS``, with a saved setting of its own in its own pydantic config model, is seen by the
command line (``evaluate.py --policy``), the benchmark (``benchmark_routers.py --routers``), every
page's router menu, export (``export_router.py``: the setting saved, and checked by its model when
the artifact is loaded) and the routing API (``serve.py``) — with no other change anywhere."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from _pages import open_page

from l2d_core.deploy import ArtifactError, load_router
from l2d_core.routers import registry

ROOT = Path(__file__).resolve().parent.parent
ROUTER_ID, LABEL = "test-long-questions", "test: long questions to the expert"
MODULE = f'''"""A rule, no learning: questions of more than ``words`` words go to the dearest expert."""

from typing import Annotated

import numpy as np
from pydantic import Field

from l2d_core.routers.base import Needs, Router
from l2d_core.routers.decision import Decision
from l2d_core.routers.registry import register
from l2d_core.routers.saved import SavedConfig

WORDS = 10


def long_questions(records, words):
    return np.array([len(r.question.split()) > words for r in records])


class LengthConfig(SavedConfig):
    """What it saves: a setting of its own, checked when the artifact is loaded."""

    words: Annotated[int, Field(ge=1)]
    expert: Annotated[int, Field(ge=1)]


@register
class LongQuestions(Router):
    id = "{ROUTER_ID}"
    label = "{LABEL}"
    description = "Questions of more than ten words go to the dearest expert, the others to the main agent."
    config_model = LengthConfig

    def decide(self, costs):
        expert = self.bench_.test.n_agents - 1
        return Decision(np.where(long_questions(self.bench_.test_records, WORDS), expert, 0))

    def freeze(self, costs, follower=None):
        return self.deployed({{"words": WORDS, "expert": self.bench_.test.n_agents - 1}}, Needs(), 0.0)

    def route(self, signals):
        config = self.deployed_.config
        return Decision(np.where(long_questions(signals.records, config["words"]), config["expert"], 0))
'''
LONG_Q = "Which writer of the nineteenth century wrote the novel about the white whale and its captain?"
CONTEXT = "Moby-Dick is an 1851 novel by American writer Herman Melville about the whale."


@pytest.fixture
def module(tmp_path, monkeypatch):
    path = tmp_path / "long_questions.py"
    path.write_text(MODULE, encoding="utf-8")
    monkeypatch.setenv(registry.ROUTERS_ENV, str(path))
    yield path
    registry._ROUTERS.pop(ROUTER_ID, None)  # the registry of this test session forgets it again
    registry._LOADED.discard(str(path))


def script(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, str(ROOT / "scripts" / name), *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


@pytest.mark.slow
def test_a_router_module_is_seen_by_every_surface(real_data, module, tmp_path):
    # the registry
    assert ROUTER_ID in registry.router_ids() and registry.router_label(ROUTER_ID) == LABEL
    # the command line: evaluate.py lists it and runs it
    helped = script("evaluate.py", "--help", cwd=tmp_path)
    assert ROUTER_ID in "".join(helped.stdout.split())  # (argparse may wrap the list at a hyphen)
    ran = script(
        "evaluate.py", "--pool", "P2", "--policy", ROUTER_ID, "--price", "0.1", "--quiet", cwd=tmp_path
    )
    assert ran.returncode == 0 and f"{ROUTER_ID} on squad11 pool P2" in ran.stdout, ran.stderr[-2000:]
    # the benchmark: a reduced run writes its results beside the zero router's
    out = tmp_path / "bench"
    argv = ["--pool", "P2", "--quick", "--limit-train", "600", "--n-boot", "20", "--no-png", "--quiet"]
    bench = script(
        "benchmark_routers.py", *argv, "--routers", ROUTER_ID, "zero", "--out", str(out), cwd=tmp_path
    )
    assert bench.returncode == 0, bench.stderr[-2000:]
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert {ROUTER_ID, "zero"} <= set(results["routers"]) and results["routers"][ROUTER_ID]["points"]
    # every page's router menu
    for page, key in (
        ("cost_explorer", "routers"),
        ("decisions", "dec_router"),
        ("single_query", "sq_router"),
    ):
        at = open_page(page, pool="P2")
        at.run()
        assert not at.exception, (page, at.exception)
        menu = at.multiselect(key=key) if key == "routers" else at.selectbox(key=key)
        assert ROUTER_ID in menu.options or LABEL in menu.options, (page, menu.options)
    # export and serve: the routing API answers with it
    art = tmp_path / "artifact"
    exported = script(
        "export_router.py", "--pool", "P2", "--router", ROUTER_ID, "--out", str(art), cwd=tmp_path
    )
    assert exported.returncode == 0 and (art / "router.json").is_file(), exported.stderr[-2000:]
    manifest = json.loads((art / "router.json").read_text(encoding="utf-8"))
    assert manifest["config"] == {"words": 10, "expert": 1}  # P2: match-lstm, then bert-ens
    for bad, why in (("ten", "config.words: Input should be a valid integer"), (0, "config.words")):
        edited = tmp_path / f"edited-{bad}"
        shutil.copytree(art, edited)
        (edited / "router.json").write_text(
            json.dumps({**manifest, "config": {**manifest["config"], "words": bad}}), encoding="utf-8"
        )
        with pytest.raises(ArtifactError, match=why):  # its own model checks its own field
            load_router(edited)
    assert load_router(art).route("Who wrote it?", CONTEXT)["agent"] == "match-lstm"
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "serve.py"), "--router", str(art), "--port", str(port)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        end = time.monotonic() + 180
        while time.monotonic() < end:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=5) as r:
                    health = json.loads(r.read())
                break
            except OSError:
                assert server.poll() is None, server.stdout.read()[-2000:]
                time.sleep(0.5)
        assert health["router"] == ROUTER_ID and health["routes_new_text"]
        assert post(f"{url}/v1/route", {"question": LONG_Q, "context": CONTEXT})["agent"] == "bert-ens"
        assert (
            post(f"{url}/v1/route", {"question": "Who wrote it?", "context": CONTEXT})["agent"]
            == "match-lstm"
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
