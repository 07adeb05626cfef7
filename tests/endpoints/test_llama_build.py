"""The local model's library as built by ``make llm``: portable, and it generates.

Runs before the server tests (``tests/conftest.py`` orders it first, in the local server's xdist group):
a build that cannot load the bundled SmolLM2 fails here, once, with a message that says so.
"""

from __future__ import annotations

import importlib.metadata
import re

import pytest

from compaction_lab.core.paths import REPO_ROOT
from tests.conftest import SHARED_SESSION_FIXTURES
from tests.llm_server import build_check, require_llama_server

pytestmark = pytest.mark.xdist_group(SHARED_SESSION_FIXTURES["llm_server"])


def _features(system_info: str) -> dict[str, bool]:
    """``"AVX2 = 1 | AVX512 = 0 | ..."`` -> {"AVX2": True, ...} (the CPU backend's compiled-in features)."""
    return {name: flag == "1" for name, flag in re.findall(r"([A-Z][A-Z0-9_]*) = ([01])", system_info)}


def _makefile_var(name: str) -> str:
    text = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    match = re.search(rf"^{name} := (.+)$", text, re.M)
    assert match, f"Makefile defines no {name}"
    return match.group(1).strip()


@pytest.mark.slow
def test_the_built_library_loads_the_bundled_model_and_generates():
    require_llama_server()
    got = build_check()
    assert got["completion_tokens"] > 0 and got["text"].strip(), got


@pytest.mark.slow
def test_the_build_is_the_pinned_version():
    require_llama_server()
    pinned = _makefile_var("LLAMA_CPP_VERSION")
    assert importlib.metadata.version("llama_cpp_python") == pinned == build_check()["version"]
    pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'"llama-cpp-python[server]=={pinned}"' in pyproject


def test_the_build_is_portable_not_tuned_to_this_cpu():
    """GGML_NATIVE=OFF with AVX2 named: the library uses AVX2 and nothing newer, whatever this CPU has."""
    require_llama_server()
    flags = _makefile_var("LLAMA_CPU_FLAGS").split()
    assert "-DGGML_NATIVE=OFF" in flags and "-DGGML_AVX2=ON" in flags and "-DGGML_AVX512=OFF" in flags
    features = _features(build_check()["system_info"])
    assert features.get("AVX2"), features
    newer = sorted(name for name, on in features.items() if on and name.startswith(("AVX512", "AMX", "AVX_VNNI")))
    assert newer == [], f"the library was built with {newer}: tuned to the building CPU, not portable"


def test_a_build_that_crashes_is_named_with_its_signal_and_the_fix(monkeypatch):
    """Negative control: a child that dies as the AVX-512-tuned build did (SIGSEGV) gives one clear message."""
    import tests.llm_server as llm_server

    require_llama_server()
    monkeypatch.setattr(llm_server, "_BUILD_RESULT", None)
    monkeypatch.setattr(llm_server, "_BUILD_CHECK", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    with pytest.raises(llm_server.BrokenBuild, match=r"crashed \(signal SIGSEGV\).*make llm"):
        llm_server.build_check()
