# compaction-lab — every set-up step lives here; a fresh machine needs only `make run` / `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LAB_STAMP := $(VENV)/.installed-lab
PROFILE ?= default
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help setup run smoke test bench lab profiles clean-results

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

run: setup ## run the whole chain on the embedded default profile (offline); PROFILE=smoke for seconds
	$(BIN)/compaction-lab run --profile $(PROFILE)

smoke: ## run the seconds-long smoke profile
	$(MAKE) run PROFILE=smoke

test: setup ## run the test suite (includes notebook smoke runs through papermill)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: setup ## speed and memory benchmarks (scripts in benchmarks/, outside pytest); BENCH=name for one
	$(BIN)/python benchmarks/run.py $(BENCH)

$(LAB_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,lab]'
	@touch $@

lab: $(LAB_STAMP) ## open the notebooks in JupyterLab
	$(BIN)/jupyter lab notebooks/

profiles: setup ## list the run profiles
	$(BIN)/compaction-lab profiles

clean-results: ## delete every run folder under data/results/
	rm -rf data/results/*
