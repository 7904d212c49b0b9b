"""``scripts/install_system_deps.sh``: the browser test needs Debian's chromium and nothing else
(playwright launches the binary itself; no WebDriver such as chromium-driver). The script is run
with a stand-in ``apt-get`` that records what it is asked to install, and ``L2D_CHROMIUM``
pointing at a browser binary that exists or not."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "install_system_deps.sh"
# every file that says what the browser test needs
SAYS_WHAT_IS_NEEDED = (
    SCRIPT,
    ROOT / "tests" / "test_browser.py",
    ROOT / "scripts" / "dashboard_driver.py",
    ROOT / "scripts" / "bench_dashboard.py",
    ROOT / "requirements.txt",
)


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def _run(tmp_path: Path, chromium: Path, installs: bool) -> tuple[subprocess.CompletedProcess, list[str]]:
    """The script with ``apt-get`` (and ``sudo``) replaced by stand-ins on PATH; the stand-in's
    ``install`` creates ``chromium`` when ``installs``. Returns the run and the apt-get calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "calls.txt"
    make = f'touch "{chromium}" && chmod +x "{chromium}"' if installs else "true"
    _executable(
        bin_dir / "apt-get",
        f'#!/bin/sh\necho "$@" >> "{calls}"\ncase "$1" in install) {make};; esac\n',
    )
    _executable(bin_dir / "sudo", '#!/bin/sh\nexec "$@"\n')
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", L2D_CHROMIUM=str(chromium))
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    return done, calls.read_text().splitlines() if calls.exists() else []


def test_the_script_installs_chromium_only_and_checks_that_it_is_there(tmp_path):
    chromium = tmp_path / "chromium"
    done, calls = _run(tmp_path, chromium, installs=True)
    assert done.returncode == 0, done.stderr
    installs = [c.split() for c in calls if c.startswith("install")]
    assert len(installs) == 1
    assert [w for w in installs[0] if not w.startswith("-")] == ["install", "chromium"]


def test_the_script_does_nothing_where_chromium_is_there(tmp_path):
    chromium = _executable(tmp_path / "chromium", "#!/bin/sh\n")
    done, calls = _run(tmp_path, chromium, installs=False)
    assert done.returncode == 0, done.stderr
    assert calls == []


def test_the_script_fails_in_one_line_when_chromium_is_still_missing(tmp_path):
    done, calls = _run(tmp_path, tmp_path / "chromium", installs=False)
    assert done.returncode == 1
    assert any(c.startswith("install") for c in calls)
    assert done.stderr.strip().splitlines() == [
        f"apt-get installed chromium but {tmp_path / 'chromium'} is still missing "
        "(tests/test_browser.py launches it)"
    ]


def test_no_file_asks_for_a_webdriver():
    for path in SAYS_WHAT_IS_NEEDED:
        assert "chromium-driver" not in path.read_text(), path
