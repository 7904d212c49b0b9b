"""Shared fixtures and the test tiers. Every test session writes its caches and reports into fresh
temporary directories, never into the project's cache/ or reports/; real data comes from
L2D_DATA_DIR (default ../shared/data). Each test is marked with its tier (``tests/_tiers.py``:
``unit``, ``integration``, ``browser``); the session's cache starts from the agent imports and
embeddings of earlier runs on the same data and code (``tests/_seed_cache.py``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from l2d_core.paths import data_dir

# the scripts import as modules in tests (`import train_agent`), as they do when run
SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

# The suite starts a few hundred Python processes (pytest-xdist workers, the pages' servers, the
# scripts, background jobs): with PYTHONDONTWRITEBYTECODE set, each compiled the project's modules
# again. Python's default, a __pycache__ beside each module (git-ignored), is kept for them.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: files go out in the items' order
        config.option.loadscopereorder = False
    # pytest-xdist workers side by side: each one's torch (and every process it starts) on its
    # share of the cores, not an OpenMP team of every core's threads per worker crowding them
    if workers := os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // int(workers))))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # a llama-server built for this machine (the README's test command builds one where the
    # packaged one cannot run) is found in the user's cache, which the tests' caches replace
    from l2d_core.agents.llm_server import SERVER_ENV, built_binary

    if SERVER_ENV not in os.environ and os.access(built_binary(), os.X_OK):
        os.environ[SERVER_ENV] = str(built_binary())


def pytest_ignore_collect(collection_path, config):
    """``-m unit`` alone: the other tiers' files are not even imported (their imports are most
    of a collection's time)."""
    from _tiers import tier_of

    if config.getoption("markexpr", "") == "unit" and collection_path.name.startswith("test_"):
        return True if collection_path.suffix == ".py" and tier_of(collection_path) != "unit" else None
    return None


def pytest_collection_modifyitems(config, items):
    """Every test gets its file's tier; a unit test asking for the real data or a model is refused.
    The longest files come first (``_tiers.FIRST``), so that the workers end together."""
    from _tiers import misplaced, start_rank, tier_of

    items.sort(key=lambda item: start_rank(item.path))  # stable: the rest keep their order

    bad = []
    for item in items:
        tier = tier_of(item.path)
        item.add_marker(getattr(pytest.mark, tier))
        if wrong := misplaced(tier, getattr(item, "fixturenames", ())):
            bad.append(f"{item.nodeid} uses {', '.join(wrong)}: move its file out of UNIT_FILES")
    if bad:
        raise pytest.UsageError("unit tests that are not:\n" + "\n".join(bad))


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory):
    """One cache directory for the whole session (embeddings of the real benchmark are
    computed once and shared by the end-to-end tests), and one reports directory: a command that
    writes reports (the README's benchmark) never writes into the project's reports/. The cache
    starts from the seed of the data files and code it derives from (``tests/_seed_cache.py``):
    embeddings shared with every run and worker of that key, builtin agents' imports copied, and
    router fits shared by the workers of this run."""
    from _seed_cache import content_key, keep, seed, seed_root

    path = tmp_path_factory.mktemp("l2d_cache")
    folder = seed_root() / content_key(data_dir())
    # pytest-xdist workers of one run share the parent of their base folders: router fits go there
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    seed(path, folder, tmp_path_factory.getbasetemp().parent / "shared_fits" if worker else None)
    set_here = {"L2D_CACHE_DIR": str(path), "L2D_REPORTS_DIR": str(tmp_path_factory.mktemp("reports"))}
    old = {k: os.environ.get(k) for k in set_here}
    os.environ.update(set_here)
    yield path
    keep(path, folder)
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A cache directory of the test's own."""
    path = tmp_path / "cache"
    monkeypatch.setenv("L2D_CACHE_DIR", str(path))
    return path


@pytest.fixture
def seeded_cache(tmp_path, monkeypatch, _session_cache):
    """A cache directory of the test's own that starts with what the session's cache holds under
    content keys, derived from data and code alone: the builtin agents' imports, the embeddings,
    router fits and validation scores (a page the test opens does not compute them again). What
    the test registers or writes stays its own. ``fresh_cache``: one that starts empty."""
    from _seed_cache import give_back, seed_from

    path = tmp_path / "cache"
    seed_from(_session_cache, path)
    monkeypatch.setenv("L2D_CACHE_DIR", str(path))
    yield path
    give_back(path, _session_cache)


@pytest.fixture(scope="session")
def real_data():
    """The real data directory; the suite needs it (CI runs with ../shared beside the clone)."""
    root = data_dir()
    if not (root / "squad" / "dev-v1.1.json").is_file():
        pytest.fail(f"real data not found under {root}: set L2D_DATA_DIR or run scripts/download_data.py")
    return root


@pytest.fixture(scope="session")
def bert_path(tmp_path_factory):
    """A tiny BertForQuestionAnswering + tokenizer saved offline (tests/_tiny_models.py)."""
    from _tiny_models import tiny_bert_qa

    return tiny_bert_qa(str(tmp_path_factory.getbasetemp()))


@pytest.fixture(scope="session")
def llama_path(tmp_path_factory):
    """A tiny LlamaForCausalLM + tokenizer saved offline (tests/_tiny_models.py)."""
    from _tiny_models import tiny_llama

    return tiny_llama(str(tmp_path_factory.getbasetemp()))


@pytest.fixture(scope="module")
def live_bench(real_data, bert_path, tmp_path_factory):
    """Pool Tiny-live (main: the tiny BERT, answering the slice's questions into the cache;
    expert: bert-ens, a prediction file) on the slice benchmark of tests/_slices.py, in a cache
    of the module's own."""
    from _slices import slice_bench

    from l2d_core.agents import AgentSpec, PoolSpec, load_agent, register_agent, register_pool, run_into_cache
    from l2d_core.agents.cache import AgentCache
    from l2d_core.data import BENCHMARK_TEST_ARTICLES, load_dataset

    mp = pytest.MonkeyPatch()
    mp.setenv("L2D_CACHE_DIR", str(tmp_path_factory.mktemp("live_cache")))
    spec = register_agent(
        AgentSpec("tiny-live", "squad11", kind="extractive", gflops=0.01, path=str(bert_path))
    )
    ds = load_dataset("squad11")
    titles = [t for t in ds.titles if t not in BENCHMARK_TEST_ARTICLES][:3]
    titles += [t for t in ds.titles if t in BENCHMARK_TEST_ARTICLES][:1]
    run_into_cache(
        load_agent(spec, device="cpu"), ds, spec.id, list(ds.by_titles(titles)), AgentCache(), progress=False
    )
    register_pool(PoolSpec("Tiny-live", "squad11", "tiny-live", ("bert-ens",)))
    yield slice_bench("Tiny-live")
    mp.undo()
