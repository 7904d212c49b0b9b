"""Where data and caches are found: the environment variables first; in a checkout, the checkout's
folders; an installed copy of ``l2d_core`` (no project folder around it) uses the platform's user
directories."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

from l2d_core import paths

ROOT = Path(__file__).resolve().parent.parent
ENV_VARS = ("L2D_DATA_DIR", "L2D_CACHE_DIR")


def test_environment_variables_win(tmp_path, monkeypatch):
    monkeypatch.setenv("L2D_DATA_DIR", str(tmp_path / "d"))
    monkeypatch.setenv("L2D_CACHE_DIR", str(tmp_path / "sub" / ".." / "c"))
    assert paths.data_dir() == tmp_path / "d"
    assert paths.cache_dir() == (tmp_path / "c").resolve() and (tmp_path / "c").is_dir()
    monkeypatch.setenv("L2D_DATA_DIR", "~/l2d-data")  # ~ is the user's home
    monkeypatch.setenv("HOME", str(tmp_path))
    assert paths.data_dir() == (tmp_path / "l2d-data").resolve()


def test_a_checkout_resolves_to_its_own_folders(monkeypatch):
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    assert paths.PROJECT_ROOT == ROOT and paths.in_checkout()
    shared = ROOT.parent / "shared" / "data"
    assert paths.data_dir() == (shared if shared.is_dir() else ROOT / "data")
    assert paths.cache_dir() == ROOT / "cache"


def test_a_checkout_without_shared_data_uses_its_data_folder(tmp_path, monkeypatch):
    """The same rules in a checkout of our own making, with and without ../shared/data."""
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    project = tmp_path / "project"
    project.mkdir()
    for name in paths.CHECKOUT_MARKERS:
        (project / name).write_text("")
    monkeypatch.setattr(paths, "PROJECT_ROOT", project)
    assert paths.in_checkout() and paths.data_dir() == project / "data"
    (tmp_path / "shared" / "data").mkdir(parents=True)
    assert paths.data_dir() == tmp_path / "shared" / "data"
    (project / "app.py").unlink()  # one marker short: not a checkout any more
    assert not paths.in_checkout()


RESOLVE = (
    "import json, l2d_core.paths as p; "
    "print(json.dumps([str(p.PROJECT_ROOT), p.in_checkout(), str(p.data_dir()), str(p.cache_dir())]))"
)


def installed_copy(tmp_path: Path, env: dict[str, str]) -> list:
    """Copy ``l2d_core`` out of the checkout and resolve its paths in a fresh interpreter, run
    from an unrelated folder."""
    site = tmp_path / "site-packages"
    shutil.copytree(ROOT / "l2d_core", site / "l2d_core", ignore=shutil.ignore_patterns("__pycache__"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in {**os.environ, **env}.items() if k not in ENV_VARS or k in env}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run(
        [sys.executable, "-c", RESOLVE], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home of the test's own, XDG variables pointing into it (platformdirs reads them)."""
    home = tmp_path / "home"
    env = {
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "xdg-data"),
        "XDG_CACHE_HOME": str(home / "xdg-cache"),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def test_an_installed_copy_uses_the_user_directories(tmp_path, home):
    root, checkout, data, cache = installed_copy(tmp_path, home)
    assert Path(root) == tmp_path / "site-packages" and not checkout
    # the same answers platformdirs gives here, under the test's own home
    assert Path(data) == Path(platformdirs.user_data_dir(paths.APP_NAME))
    assert Path(cache) == Path(platformdirs.user_cache_dir(paths.APP_NAME))
    assert Path(data) == Path(home["XDG_DATA_HOME"]) / paths.APP_NAME
    assert Path(cache) == Path(home["XDG_CACHE_HOME"]) / paths.APP_NAME and Path(cache).is_dir()
    assert not (tmp_path / "cache").exists() and not (tmp_path / "shared").exists()


def test_an_installed_copy_without_xdg_variables_uses_the_home(tmp_path, home, monkeypatch):
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.delenv("XDG_CACHE_HOME")
    _, _, data, cache = installed_copy(tmp_path, {"HOME": home["HOME"]})
    if sys.platform.startswith("linux"):
        assert Path(data) == Path(home["HOME"]) / ".local" / "share" / paths.APP_NAME
        assert Path(cache) == Path(home["HOME"]) / ".cache" / paths.APP_NAME
    assert Path(data).is_relative_to(home["HOME"]) and Path(cache).is_relative_to(home["HOME"])


def test_an_installed_copy_still_obeys_the_environment_variables(tmp_path, home):
    env = {**home, "L2D_DATA_DIR": str(tmp_path / "d"), "L2D_CACHE_DIR": str(tmp_path / "c")}
    _, checkout, data, cache = installed_copy(tmp_path, env)
    assert not checkout and (Path(data), Path(cache)) == (tmp_path / "d", tmp_path / "c")
