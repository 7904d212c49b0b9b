#!/usr/bin/env python
"""Download the SQuAD dev sets and the leaderboard prediction files into the data dir.

The files, their destinations (relative to the data dir), expected sha256 and candidate
URLs are listed in ``l2d_core/data/download_manifest.json``. The layout matches
``shared/data`` (``squad/dev-v1.1.json``, ``predictions/squad-v1.1/<slug>.json``, ...), so
pointing ``L2D_DATA_DIR`` at the destination is all the tool needs afterwards.

Each file is streamed to a temporary file next to its destination and renamed into place
only after its sha256 matched; files already present with the right sha256 are skipped.

    python scripts/download_data.py                       # everything, into the data dir
    python scripts/download_data.py --dest data --only 'squad/*'
    python scripts/download_data.py --list
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from l2d_core.paths import PROJECT_ROOT, data_dir  # noqa: E402
from l2d_core.stores import atomic_file  # noqa: E402

__all__ = [
    "MANIFEST_PATH",
    "ManifestEntry",
    "ChecksumError",
    "load_manifest",
    "select_entries",
    "rewrite_url",
    "sha256_file",
    "default_dest",
    "download_entry",
    "main",
]

MANIFEST_PATH = PROJECT_ROOT / "l2d_core" / "data" / "download_manifest.json"
USER_AGENT = "l2d-qa-routing-download/0.1 (+urllib)"
CHUNK = 1 << 16


class ChecksumError(ValueError):
    """Downloaded bytes do not have the expected sha256 (or size)."""


@dataclass(frozen=True)
class ManifestEntry:
    dest: str  # POSIX path relative to the data dir
    sha256: str
    bytes: int
    urls: tuple[str, ...]
    kind: str = ""
    description: str = ""


def load_manifest(path: Path = MANIFEST_PATH) -> list[ManifestEntry]:
    """Parse and sanity-check the manifest (relative, unique destinations; 64-hex sha256)."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    entries: list[ManifestEntry] = []
    seen: set[str] = set()
    for i, raw in enumerate(doc["files"]):
        dest = str(raw["dest"])
        p = PurePosixPath(dest)
        if p.is_absolute() or ".." in p.parts or not p.parts:
            raise ValueError(f"{path}: entry #{i}: destination {dest!r} must be a relative path")
        if dest in seen:
            raise ValueError(f"{path}: duplicate destination {dest!r}")
        seen.add(dest)
        sha = str(raw["sha256"]).lower()
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise ValueError(f"{path}: {dest}: sha256 must be 64 hex digits")
        urls = tuple(raw["urls"])
        if not urls:
            raise ValueError(f"{path}: {dest}: no URL")
        entries.append(
            ManifestEntry(dest, sha, int(raw["bytes"]), urls, raw.get("kind", ""), raw.get("description", ""))
        )
    return entries


def select_entries(entries: list[ManifestEntry], patterns: list[str] | None) -> list[ManifestEntry]:
    """Entries whose destination matches any pattern (glob, or substring without wildcards)."""
    if not patterns:
        return list(entries)

    def hit(e: ManifestEntry, pat: str) -> bool:
        if any(c in pat for c in "*?["):
            return fnmatch.fnmatchcase(e.dest, pat) or fnmatch.fnmatchcase(PurePosixPath(e.dest).name, pat)
        return pat in e.dest

    return [e for e in entries if any(hit(e, p) for p in patterns)]


def rewrite_url(url: str, base: str | None) -> str:
    """Replace scheme and host of ``url`` by ``base`` (which may carry a path prefix).

    ``https://raw.githubusercontent.com/o/r/c/a%20b.json`` with base
    ``http://127.0.0.1:8000/mirror`` becomes ``http://127.0.0.1:8000/mirror/o/r/c/a%20b.json``:
    the path (still URL-quoted) and query are kept, so a mirror only has to reproduce the
    path layout.
    """
    if not base:
        return url
    b = urlsplit(base)
    u = urlsplit(url)
    prefix = b.path.rstrip("/")
    return urlunsplit((b.scheme, b.netloc, prefix + u.path, u.query, ""))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def _writable(path: Path) -> bool:
    """Whether ``path`` (or, if missing, its nearest existing ancestor) is writable."""
    p = path
    while not p.exists():
        if p.parent == p:
            return False
        p = p.parent
    return p.is_dir() and os.access(p, os.W_OK | os.X_OK)


def default_dest() -> Path:
    d = data_dir()
    return d if _writable(d) else PROJECT_ROOT / "data"


def _progress(total: int | None, desc: str, enabled: bool):
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a requirement
        enabled = False
        tqdm = None
    if not enabled or tqdm is None:
        return _NoBar()
    return tqdm(
        total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, leave=False, file=sys.stderr
    )


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _fetch_verified(url: str, entry: ManifestEntry, target: Path, timeout: float, progress: bool) -> None:
    """Stream ``url`` to a temp file beside ``target``; rename into place iff the sha256 matches."""
    h = hashlib.sha256()
    n = 0
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    # renamed into place (readable by others) only when the block ends without an error
    with atomic_file(target, binary=True) as out, urllib.request.urlopen(req, timeout=timeout) as resp:
        length = resp.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else entry.bytes
        bar = _progress(total, PurePosixPath(entry.dest).name[:40], progress)
        try:
            while True:
                block = resp.read(CHUNK)
                if not block:
                    break
                n += len(block)
                if n > entry.bytes:
                    raise ChecksumError(
                        f"{url} sent more than the expected {entry.bytes:,} bytes; not the right file"
                    )
                h.update(block)
                out.write(block)
                bar.update(len(block))
        finally:
            bar.close()
        out.flush()
        os.fsync(out.fileno())
        digest = h.hexdigest()
        if digest != entry.sha256:
            raise ChecksumError(
                f"checksum mismatch for {url}: got sha256 {digest} ({n:,} bytes), "
                f"expected {entry.sha256} ({entry.bytes:,} bytes); file discarded"
            )


def download_entry(
    entry: ManifestEntry,
    dest: Path,
    base_url: str | None = None,
    timeout: float = 60.0,
    progress: bool = True,
) -> str:
    """Make ``dest/entry.dest`` hold the right bytes. Returns ``"present"`` or ``"downloaded"``.

    Tries the candidate URLs in order; raises ``RuntimeError`` naming every failure when
    none of them delivered the right bytes. A file already at the destination is only
    replaced by verified bytes.
    """
    target = dest.joinpath(*PurePosixPath(entry.dest).parts)
    if target.is_file() and sha256_file(target) == entry.sha256:
        return "present"
    errors: list[str] = []
    for url in entry.urls:
        url = rewrite_url(url, base_url)
        try:
            _fetch_verified(url, entry, target, timeout, progress)
            return "downloaded"
        except ChecksumError as exc:
            errors.append(str(exc))
        except urllib.error.HTTPError as exc:
            errors.append(f"{url}: HTTP {exc.code} {exc.reason}")
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            errors.append(f"{url}: {type(exc).__name__}: {reason}")
    stale = (
        " (the existing file there has a different sha256 and was left as it is)" if target.exists() else ""
    )
    raise RuntimeError("; ".join(errors) + stale)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Download the SQuAD dev sets and leaderboard prediction files (sha256-verified).",
    )
    ap.add_argument(
        "--dest",
        type=Path,
        default=None,
        help="data dir to fill (default: L2D_DATA_DIR / "
        "the project's data dir if writable, else PROJECT_ROOT/data)",
    )
    ap.add_argument(
        "--base-url-override",
        metavar="URL",
        default=None,
        help="replace scheme+host of every URL by URL (a mirror with the same path layout)",
    )
    ap.add_argument(
        "--only",
        metavar="PATTERN",
        action="append",
        default=None,
        help="only destinations matching PATTERN (glob like 'squad/*', or a substring); repeatable",
    )
    ap.add_argument("--timeout", type=float, default=60.0, help="network timeout per request in seconds")
    ap.add_argument("--manifest", type=Path, default=MANIFEST_PATH, help=argparse.SUPPRESS)
    ap.add_argument("--list", action="store_true", help="list the files and exit")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    if args.base_url_override:
        b = urlsplit(args.base_url_override)
        if b.scheme not in ("http", "https") or not b.netloc:
            ap.error(f"--base-url-override must look like http://host[:port][/prefix], got {b.geturl()!r}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        entries = load_manifest(args.manifest)
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: cannot read the download manifest {args.manifest}: {exc}", file=sys.stderr)
        return 2
    chosen = select_entries(entries, args.only)
    if not chosen:
        print(f"error: no file matches {args.only}; known files:", file=sys.stderr)
        for e in entries:
            print(f"  {e.dest}", file=sys.stderr)
        return 2
    if args.list:
        for e in chosen:
            print(f"{e.dest}\t{e.bytes}\t{e.sha256}\t{e.urls[0]}")
        return 0

    dest = (args.dest or default_dest()).expanduser().resolve()
    print(f"downloading {len(chosen)} file(s) into {dest}")
    status: dict[str, list[str]] = {"present": [], "downloaded": [], "failed": []}
    failures: list[tuple[str, str]] = []
    t0 = time.monotonic()
    for i, e in enumerate(chosen, 1):
        head = f"[{i}/{len(chosen)}] {e.dest}"
        try:
            how = download_entry(e, dest, args.base_url_override, args.timeout, not args.no_progress)
        except Exception as exc:  # noqa: BLE001 - one bad file must not stop the others
            status["failed"].append(e.dest)
            failures.append((e.dest, str(exc)))
            print(f"{head}: FAILED: {exc}", file=sys.stderr)
            continue
        status[how].append(e.dest)
        print(f"{head}: {'already present, sha256 ok' if how == 'present' else 'downloaded, sha256 ok'}")

    print(
        f"summary: {len(status['downloaded'])} downloaded, {len(status['present'])} already present, "
        f"{len(status['failed'])} failed ({time.monotonic() - t0:.1f}s) in {dest}"
    )
    for d, why in failures:
        print(f"  failed: {d}: {why}", file=sys.stderr)
    if failures:
        return 1
    if args.dest and dest != data_dir():
        print(f"to use these files: export L2D_DATA_DIR={dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
