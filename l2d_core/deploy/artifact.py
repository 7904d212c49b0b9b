"""A router saved to a folder with everything it needs to route again — and nothing pickled.

::

    <folder>/router.json          what the router is: pool and agent specs, costs or budget,
                                  feature configuration, encoder / main-agent fingerprints, versions
    <folder>/estimator/           its trained head: model.safetensors, scaler.safetensors,
                                  config.json (and platt.safetensors for a calibrated cascade;
                                  its other cross-fitted heads in head1/, head2/, …)

Loading checks every version the routing depends on and says what does not match and what to do
(:class:`ArtifactError`); it never guesses.
"""

from __future__ import annotations

import json
import tomllib
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ..data import safe_json
from ..qa.scoring import SCORING_VERSION
from ..routers.posthoc_inputs import FEATURE_FORMAT
from ..stores import atomic_write_text
from .integrity import regular_file_problem

__all__ = [
    "ARTIFACT_FORMAT",
    "MANIFEST",
    "ESTIMATOR_DIR",
    "ArtifactError",
    "versions",
    "write_manifest",
    "read_manifest",
    "check_versions",
    "now_iso",
]

# bump when router.json or the estimator folder changes meaning (4: cross-fitted post-hoc heads)
ARTIFACT_FORMAT = 4
MANIFEST = "router.json"
ESTIMATOR_DIR = "estimator"
MAX_MANIFEST_BYTES = 16 * 1024 * 1024  # a manifest is a few KB
EXPORT_HINT = "export it again with this version: python scripts/export_router.py --pool … --out …"


class ArtifactError(ValueError):
    """A router artifact that cannot be used as it is (the message says why and what to do)."""


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def project_version() -> str | None:
    """This project's version: installed metadata, else the checkout's ``pyproject.toml``."""
    found = _package_version("l2d-qa-routing")
    toml = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if found is None and toml.is_file():
        found = tomllib.loads(toml.read_text(encoding="utf-8")).get("project", {}).get("version")
    return found


def versions() -> dict:
    """The versions an artifact records: the ones routing depends on (``format``,
    ``features``, ``scoring``) are checked on load; the libraries are informative."""
    return {
        "format": ARTIFACT_FORMAT,
        "features": FEATURE_FORMAT,
        "scoring": SCORING_VERSION,
        "l2d_core": project_version(),
        "torch": _package_version("torch"),
        "transformers": _package_version("transformers"),
    }


def write_manifest(folder: Path, manifest: dict) -> None:
    """``router.json``, written atomically (a killed export never leaves half a manifest)."""
    atomic_write_text(folder / MANIFEST, json.dumps(manifest, indent=1))


def read_manifest(folder: str | Path) -> dict:
    """``router.json`` of an artifact folder, with its versions checked."""
    folder = Path(folder).expanduser()
    path = folder / MANIFEST
    if not path.exists() and not path.is_symlink():
        what = "does not exist" if not folder.exists() else f"has no {MANIFEST}"
        raise ArtifactError(f"{folder} {what}: it is not a router artifact ({EXPORT_HINT})")
    problem = regular_file_problem(path, MAX_MANIFEST_BYTES)
    if problem:
        raise ArtifactError(f"{path} cannot be read: {problem} ({EXPORT_HINT})")
    try:
        manifest = safe_json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, safe_json.JSONNestingError) as exc:
        raise ArtifactError(f"{path} is not readable JSON ({exc}): {EXPORT_HINT}") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("versions"), dict):
        raise ArtifactError(f"{path} has no versions: it is not a router artifact ({EXPORT_HINT})")
    check_versions(manifest, path)
    return manifest


def check_versions(manifest: dict, where: Path | str) -> None:
    """Refuse an artifact whose format, answer features or agent scoring differ from this code's."""
    got, now = manifest["versions"], versions()
    checks = [("format", "artifact format")]
    needs = manifest.get("needs")
    if isinstance(needs, dict) and needs.get("answers"):
        # the cascade reads the main agent's answer features and confidence records
        checks += [("features", "answer-feature format"), ("scoring", "agent scoring (confidence) version")]
    bad = [
        f"{label} {got.get(key)} (this version: {now[key]})"
        for key, label in checks
        if got.get(key) != now[key]
    ]
    if bad:
        made = got.get("l2d_core") or "an unknown version"
        raise ArtifactError(
            f"{where} was exported by l2d-qa-routing {made} with {', '.join(bad)}: it would route "
            f"differently here, so it is refused; {EXPORT_HINT}"
        )


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
