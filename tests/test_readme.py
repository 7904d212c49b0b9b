"""Every command the README shows runs, in the order given: the short ones are run here, in a
folder of their own (scripts linked in, caches in the session's cache), and the long ones are named
with the reason they are not — so a command added to the README and to neither list fails here."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# commands not run here, and why (each must still appear in the README)
QUICK = "needs the quick model trained (minutes; tests/test_serve.py serves new text on a tiny live model)"
LONG = {
    "pip install -r requirements.txt && pip install --no-deps -r requirements-nodeps.txt && streamlit run "
    "app.py": "the dashboard (tests/test_browser.py)",
    "bash scripts/install_system_deps.sh && pip install -r requirements-dev.txt && pip install --no-deps -r "
    "requirements-nodeps.txt && ruff check . && ruff format --check . && python -m pytest -m unit && "
    "python scripts/build_llama_server.py --if-needed && "
    "python -m pytest -m 'not unit' -n 2 --dist loadfile": "this test suite itself",
    "python scripts/rank_pools.py --pools P2 P3": "a minute a pool (tests/test_default_view.py ranks pools)",
    "python scripts/rank_pools.py --ship": "rewrites what ships (test_default_view.py checks it)",
    "python scripts/bench_budgets.py --pools P2": "minutes (test_cascade.py and test_staged.py hold budgets)",
    "python scripts/train_agent.py --profile quick": "minutes of fine-tuning (tests/test_train_agent.py runs "
    "the same code on a tiny model)",
    "python scripts/evaluate.py --pool P3-quick --policy cascade --price 0.1": QUICK,
    "python scripts/export_router.py --pool P3-quick --router l2d-cascade --out cache/exports/quick": QUICK,
    "python scripts/serve.py --router cache/exports/quick --port 8001 &": QUICK,
    "curl -s localhost:8001/v1/route -H 'content-type: application/json' -d '{\"question\": \"Who wrote "
    'Moby-Dick?", "context": "Moby-Dick is a novel by Herman Melville."}\'': QUICK,
}


def readme_commands() -> list[str]:
    """The commands of the README's bash blocks, continuation lines joined, comments dropped."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", "", block)
        for line in joined.splitlines():
            line = line.split("  #")[0].strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def test_every_readme_command_is_run_here_or_named_as_long():
    commands = readme_commands()
    assert len(commands) >= 10
    assert set(LONG) <= set(commands), set(LONG) - set(commands)


def wait_for(url: str, proc: subprocess.Popen, timeout: float = 240.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"the server stopped: {proc.stdout.read()[-2000:] if proc.stdout else ''}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"{url} never answered")


@pytest.mark.slow
def test_the_short_readme_commands_run_in_order(real_data, tmp_path):
    if shutil.which("curl") is None:
        pytest.fail("curl is not installed: the README's API example needs it (apt-get install curl)")
    work = tmp_path / "clone"
    work.mkdir()
    (work / "scripts").symlink_to(ROOT / "scripts")
    preds = json.loads(
        (real_data / "predictions" / "squad-v1.1" / "r-net-microsoft-research-asia.json").read_text()
    )
    (work / "preds.json").write_text(json.dumps(preds))  # the README's "your own system"
    # the README's "your own log": the remote LLM log keyed by question id (id, right, confidence, s)
    logs = real_data / "llm_routing" / "bisupervised"
    ids = dict(
        line.split(",")[:2] for line in (logs / "squadv2_index_to_official_id.csv").read_text().split()[1:]
    )
    rows = [line.split(",") for line in (logs / "squadv2_remote.csv").read_text().split()[1:]]
    (work / "my_run.csv").write_text(
        "id,correct,confidence,latency_s\n" + "".join(f"{ids[r[0]]},{r[1]},{r[3]},{r[4]}\n" for r in rows)
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    servers = []
    ran = []
    try:
        for cmd in readme_commands():
            if cmd in LONG:
                continue
            if cmd.endswith("&"):  # a server: started, then waited for
                port = re.search(r"--port (\d+)", cmd).group(1)
                proc = subprocess.Popen(
                    cmd.rstrip("& "), shell=True, cwd=work, env=env, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True, start_new_session=True,
                )  # fmt: skip
                servers.append(proc)
                wait_for(f"http://127.0.0.1:{port}/healthz", proc)
                ran.append(cmd)
                continue
            out = subprocess.run(
                cmd, shell=True, cwd=work, env=env, capture_output=True, text=True, timeout=900
            )
            assert out.returncode == 0, (cmd, out.stdout[-2000:], out.stderr[-2000:])
            ran.append(cmd)
            if cmd.startswith("curl"):
                routed = json.loads(out.stdout)
                assert routed["agent"] in ("match-lstm", "bert-ens") and routed["compared"]["values"], routed
            if "import_log.py" in cmd:
                assert "10,669" in out.stdout or "10669" in out.stdout, out.stdout
            if "evaluate.py" in cmd:
                assert "EM" in out.stdout and "test questions" in out.stdout, out.stdout
            if "--budget-share 0.3" in cmd:
                share = float(re.search(r"test articles: ([\d.]+)", out.stdout).group(1))
                assert abs(share - 0.3) <= 0.02, out.stdout
    finally:
        for proc in servers:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
    assert len(ran) >= 6 and any(c.startswith("curl") for c in ran), ran
    assert sys.executable  # the commands ran with the interpreter on PATH, as a user's would


def test_the_readme_names_every_router_of_the_registry():
    """The README's list of what ``--policy`` takes is typed: a router registered later (the
    confidence threshold was missing from it) fails here until the README names it."""
    from l2d_core.routers.registry import routers

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [rid for rid in routers() if f"`{rid}`" not in text]
    assert not missing, f"the README does not name these routers: {missing}"
