"""The package's shape, read from its source with ``ast``: imports run one way through the layers
(no cycle, no climb back up), no private name is imported across modules, ``l2d_core`` never
imports Streamlit, the pages import no ``l2d_core`` internals by private name, a page's fragments
read no top-level name the page binds twice, and no module grows past ~400 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "l2d_core"
# Lower layers first; a module may import its own layer and the layers before it.
LAYERS = (
    ("paths", "runtime", "stores", "background", "flops", "data"),
    ("qa",),
    ("agents",),
    ("method",),
    ("routers",),
    ("evaluation",),
    ("report", "app_logic", "deploy", "cli"),
)
MAX_LINES = 400


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path, name: str) -> list[tuple[str, list[str], int]]:
    """Every import of a module, at any depth (lazy ones too): (absolute module, names, line)."""
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((target, [a.name for a in node.names], node.lineno))
    return out


def internal_edges() -> dict[str, set[str]]:
    """module → l2d_core modules it imports (``from pkg import mod`` counts as importing mod)."""
    mods = modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for target, names, _ in imports(path, name):
            if not target.startswith("l2d_core"):
                continue
            subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in mods]
            edges[name].update(subs or ([target] if target in mods else []))
    return edges


def layer_of(name: str) -> int | None:
    parts = name.split(".")
    if len(parts) < 2:
        return None  # the package itself
    return next((i for i, layer in enumerate(LAYERS) if parts[1] in layer), None)


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a list of modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state and (found := visit(m)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    assert find_cycle(internal_edges()) is None


def test_every_module_has_a_layer():
    missing = [m for m in modules() if m != "l2d_core" and layer_of(m) is None]
    assert not missing, f"modules outside every layer: {missing}"


def test_imports_run_one_way():
    climbs = []
    for name, targets in internal_edges().items():
        for t in targets:
            lo, hi = layer_of(name), layer_of(t)
            if lo is not None and hi is not None and hi > lo:
                climbs.append(f"{name} → {t}")
    assert not climbs, "imports that climb up a layer:\n" + "\n".join(sorted(climbs))


def siblings_imported(edges: dict[str, set[str]], package: str, sibling: str) -> list[str]:
    """Imports from ``l2d_core.<package>`` into ``l2d_core.<sibling>`` (same layer, yet barred).

    >>> siblings_imported({"l2d_core.deploy.x": {"l2d_core.app_logic.y"}}, "deploy", "app_logic")
    ['l2d_core.deploy.x → l2d_core.app_logic.y']
    """
    return sorted(
        f"{name} → {t}"
        for name, targets in edges.items()
        if name.split(".")[1:2] == [package]
        for t in targets
        if t.split(".")[1:2] == [sibling]
    )


def test_serving_imports_nothing_from_the_dashboard():
    """The deployed router (``deploy``) and the dashboard's logic (``app_logic``) are siblings:
    serving runs without the dashboard, so ``deploy`` imports nothing from ``app_logic``."""
    assert siblings_imported({"l2d_core.deploy.a": {"l2d_core.app_logic.b"}}, "deploy", "app_logic")
    bad = siblings_imported(internal_edges(), "deploy", "app_logic")
    assert not bad, "the serving path imports dashboard logic:\n" + "\n".join(bad)


def test_no_private_imports_across_modules():
    bad = []
    for name, path in modules().items():
        for target, names, line in imports(path, name):
            if target.startswith("l2d_core") and target != name:
                bad += [f"{name}:{line} imports {target}.{n}" for n in names if n.startswith("_")]
    for path in [*ROOT.glob("pages/**/*.py"), ROOT / "app.py", *ROOT.glob("scripts/*.py")]:
        for target, names, line in imports(path, module_name(path)):
            if target.startswith("l2d_core"):
                bad += [f"{path.name}:{line} imports {target}.{n}" for n in names if n.startswith("_")]
    assert not bad, "\n".join(bad)


def test_engine_never_imports_streamlit():
    hits = [
        f"{name}:{line}"
        for name, path in modules().items()
        for target, _, line in imports(path, name)
        if target.split(".")[0] == "streamlit"
    ]
    assert not hits, hits


@pytest.mark.parametrize("name", sorted(modules()))
def test_module_size(name):
    n = len(modules()[name].read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{name} has {n} lines: give its second job a module of its own"


def test_pages_only_draw():
    """Pages hold UI: no numpy math, no torch, no direct use of the engine's lower layers (the
    cost setting, ``l2d_core.method.costs``, is the one value a page builds and hands down; the
    router registry, ``l2d_core.routers.registry``, is what every surface reads its menus from)."""
    allowed = ("l2d_core.method.costs", "l2d_core.routers.registry")
    for path in ROOT.glob("pages/**/*.py"):
        for target, _, line in imports(path, module_name(path)):
            top = target.split(".")
            assert top[0] not in ("numpy", "torch", "sklearn"), f"{path.name}:{line} imports {target}"
            if top[0] == "l2d_core" and len(top) > 1 and target not in allowed:
                assert top[1] not in ("method", "routers", "qa"), f"{path.name}:{line} imports {target}"


def _module_level_stores(tree: ast.Module) -> list[str]:
    """Names bound at a module's top level (inside its top-level if/with/for/try blocks too, not
    inside functions or classes), once per binding."""
    names: list[str] = []

    def visit(node):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for stmt in tree.body:
        visit(stmt)
    return names


def _is_fragment(fn: ast.FunctionDef) -> bool:
    decorators = (d.func if isinstance(d, ast.Call) else d for d in fn.decorator_list)
    return any(isinstance(d, ast.Attribute) and d.attr == "fragment" for d in decorators)


def test_page_fragments_read_names_bound_once():
    """A fragment (``@st.fragment``) re-runs alone, reading the page's top-level names as the last
    full run left them: a name the page binds twice (a later line reusing it for something else)
    gives the fragment the wrong value — a slider move on the cost explorer once raised KeyError so."""
    fragments = 0
    for path in ROOT.glob("pages/**/*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        stores = _module_level_stores(tree)
        for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and _is_fragment(n)):
            fragments += 1
            local = {a.arg for a in fn.args.args} | {
                n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
            read = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            twice = sorted(n for n in read - local if stores.count(n) > 1)
            assert not twice, f"{path.name}: fragment {fn.name}() reads {twice}, bound twice at top level"
    assert fragments >= 2  # the cost explorer's and the comparison page's, at least
