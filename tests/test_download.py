"""scripts/download_data.py against a local HTTP server (never the internet), and its manifest
checked against the real files in the data dir."""

from __future__ import annotations

import functools
import hashlib
import http.server
import importlib.util
import json
import shutil
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from l2d_core.paths import PROJECT_ROOT, data_dir

SCRIPT = PROJECT_ROOT / "scripts" / "download_data.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("download_data", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


dl = _load_script()
MANIFEST = {e.dest: e for e in dl.load_manifest()}

V11 = "squad/dev-v1.1.json"
COATT = (
    "predictions/squad-v1.1/"
    "co-attention-allen-institute-for-artificial-intelligence-and-university-of-washington.json"
)
BIDAF = (
    "predictions/squad-v2.0/bidaf-plus-self-attention-plus-elmo-single-model-"
    "allen-institute-for-artificial-intelligence-modified-by-stanford.json"
)
SPAN = "predictions/squad-v1.1/span-classifier-google-nyc.json"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _real(rel: str) -> Path:
    p = data_dir() / rel
    if not p.is_file():
        pytest.skip(f"real data file {p} not available")
    return p


def _served_path(root: Path, url: str) -> Path:
    """Where a file must lie under the server root for ``url`` (host replaced) to find it."""
    return root.joinpath(*[part for part in unquote(urlsplit(url).path).split("/") if part])


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        pass


@pytest.fixture
def server(tmp_path):
    """A threaded HTTP server on 127.0.0.1 (port 0) serving ``tmp_path/served``."""
    root = tmp_path / "served"
    root.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.timeout = 5
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        host, port = httpd.server_address[:2]
        yield root, f"http://{host}:{port}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def _serve(root: Path, rel: str, data: bytes | Path, candidate: int = 0) -> Path:
    target = _served_path(root, MANIFEST[rel].urls[candidate])
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, Path):
        shutil.copyfile(data, target)
    else:
        target.write_bytes(data)
    return target


def _run(base, dest, *only):
    argv = ["--base-url-override", base, "--dest", str(dest), "--timeout", "10", "--no-progress"]
    for pat in only:
        argv += ["--only", pat]
    return dl.main(argv)


def _no_partials(dest: Path) -> None:
    assert not [p for p in dest.rglob("*") if p.name.endswith(".part")]


# ----------------------------------------------------------------------------- manifest


def test_manifest_matches_local_files():
    """Every manifest file present in the real data dir has the manifest's sha256 and size."""
    root = data_dir()
    present = [e for e in MANIFEST.values() if (root / e.dest).is_file()]
    if not present:
        pytest.skip(f"no data files under {root}")
    for e in present:
        path = root / e.dest
        assert path.stat().st_size == e.bytes, e.dest
        assert _sha(path) == e.sha256, e.dest
    if root == PROJECT_ROOT.parent / "shared" / "data":
        # shared/data holds everything except the official v2.0 dev set (see its MANIFEST.md)
        assert {e.dest for e in present} == set(MANIFEST) - {"squad/dev-v2.0.json"}


def test_manifest_agrees_with_leaderboard_summary():
    summary_path = data_dir() / "predictions" / "leaderboard_summary.json"
    if not summary_path.is_file():
        pytest.skip("leaderboard_summary.json not available")
    systems = json.loads(summary_path.read_text(encoding="utf-8"))["systems"]
    preds = {d for d in MANIFEST if d.startswith("predictions/")}
    assert preds == {s["file"] for s in systems} and len(preds) == 13
    for s in systems:
        e = MANIFEST[s["file"]]
        assert (e.sha256, e.bytes) == (s["sha256"], s["bytes"])
        # the commit the summary records is among the candidates, and every URL names a source path
        assert any(s["first_added_commit"] in u for u in e.urls)
        for u in e.urls:
            assert u.startswith("https://raw.githubusercontent.com/rajpurkar/SQuAD-explorer/")
            assert " " not in u and "&" not in u and "[" not in u
            assert any(unquote(urlsplit(u).path).endswith("/" + p) for p in s["source_paths"])
    assert MANIFEST[V11].sha256 == "95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9"
    assert MANIFEST["squad/dev-v2.0.json"].sha256 == (
        "80a5225e94905956a6446d296ca1093975c4d3b3260f1d6c8f68bc2ab77182d8"
    )
    assert MANIFEST[V11].urls[0] == "https://rajpurkar.github.io/SQuAD-explorer/dataset/dev-v1.1.json"


def test_rewrite_url_keeps_layout():
    url = "https://raw.githubusercontent.com/o/r/abc/models/A%20%26%20B.json"
    assert (
        dl.rewrite_url(url, "http://127.0.0.1:8000")
        == "http://127.0.0.1:8000/o/r/abc/models/A%20%26%20B.json"
    )
    assert dl.rewrite_url(url, "http://m:1/pre/") == "http://m:1/pre/o/r/abc/models/A%20%26%20B.json"
    assert dl.rewrite_url(url, None) == url


def test_only_patterns():
    entries = list(MANIFEST.values())
    assert [e.dest for e in dl.select_entries(entries, ["squad/*"])] == [V11, "squad/dev-v2.0.json"]
    assert [e.dest for e in dl.select_entries(entries, ["co-attention"])] == [COATT]
    assert len(dl.select_entries(entries, None)) == 15
    assert dl.main(["--only", "no-such-file", "--dest", "/nonexistent"]) == 2


# ----------------------------------------------------------------------------- downloading


def test_download_verify_and_skip(server, tmp_path, capsys):
    root, base = server
    _serve(root, V11, _real(V11))
    _serve(root, BIDAF, _real(BIDAF))  # brackets and '+' in the source path
    # co-attention only at its second candidate URL (the '&' name): the fallback must find it
    assert "%26" in MANIFEST[COATT].urls[1]
    _serve(root, COATT, _real(COATT), candidate=1)
    dest = tmp_path / "dest"

    assert _run(base, dest, "squad/dev-v1.1*", "bidaf", "co-attention") == 0
    for rel in (V11, BIDAF, COATT):
        assert _sha(dest / rel) == MANIFEST[rel].sha256
    out = capsys.readouterr().out
    assert "3 downloaded, 0 already present, 0 failed" in out
    _no_partials(dest)

    # second run: nothing fetched (the server no longer has the files)
    for p in [p for p in root.rglob("*") if p.is_file()]:
        p.unlink()
    assert _run(base, dest, "squad/dev-v1.1*", "bidaf", "co-attention") == 0
    assert "0 downloaded, 3 already present, 0 failed" in capsys.readouterr().out


def test_corrupt_file_fails_cleanly(server, tmp_path, capsys):
    root, base = server
    dest = tmp_path / "dest"
    _serve(root, COATT, _real(COATT))
    assert _run(base, dest, "co-attention") == 0
    good = dest / COATT
    good_mtime = good.stat().st_mtime_ns
    capsys.readouterr()

    real_span = _real(SPAN).read_bytes()
    _serve(root, SPAN, real_span[:-10] + b"corrupted!")  # same size, wrong bytes
    assert _run(base, dest, "span-classifier", "co-attention") != 0
    captured = capsys.readouterr()
    assert "checksum mismatch" in captured.err
    assert "0 downloaded, 1 already present, 1 failed" in captured.out
    assert not (dest / SPAN).exists()
    _no_partials(dest)
    assert good.is_file() and good.stat().st_mtime_ns == good_mtime
    assert _sha(good) == MANIFEST[COATT].sha256


def test_oversized_and_missing_files_fail(server, tmp_path, capsys):
    root, base = server
    dest = tmp_path / "dest"
    _serve(root, SPAN, _real(SPAN).read_bytes() + b"x" * 100)
    assert _run(base, dest, "span-classifier", "dynamic-chunk") == 1
    err = capsys.readouterr().err
    assert "more than the expected" in err
    assert "HTTP 404" in err  # dynamic-chunk-reader is not served at all
    assert not (dest / SPAN).exists()
    _no_partials(dest)


def test_stale_file_is_replaced_only_by_verified_bytes(server, tmp_path):
    root, base = server
    dest = tmp_path / "dest"
    stale = dest / SPAN
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old, wrong content")
    # nothing served: the stale file stays as it is
    assert _run(base, dest, "span-classifier") == 1
    assert stale.read_bytes() == b"old, wrong content"
    # served correctly: replaced
    _serve(root, SPAN, _real(SPAN))
    assert _run(base, dest, "span-classifier") == 0
    assert _sha(stale) == MANIFEST[SPAN].sha256
    _no_partials(dest)
