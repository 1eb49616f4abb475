# The two set-up commands of the README:
#   make reproduce   create .venv, install pinned dependencies, run the default pipeline on CPU
#   make test        run the test suite
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)
# torch's default of one thread per core made small-model steps 25-70x slower here (DESIGN.md);
# stages set their own count from params.yaml (runtime.threads).
PIP := $(BIN)/python -m pip install --disable-pip-version-check -c requirements/constraints.txt

.PHONY: install reproduce test lint schema clean
.DEFAULT_GOAL := reproduce

$(VENV)/.installed: pyproject.toml requirements/constraints.txt requirements/no-deps.txt
	$(PYTHON) -m venv $(VENV)
	# torch first and alone, pinned: a bare `torch` requirement resolves to a multi-GB CUDA build
	$(PIP) torch==2.13.0
	$(PIP) -e '.[dev]'
	# curvature operators: no-deps on purpose, see the file
	$(PIP) --no-deps -r requirements/no-deps.txt
	# the neighbour search's numba kernels, compiled once into their on-disk cache here rather
	# than by the pipeline's first intrinsic-dimension jobs, each on its own (~7 s)
	$(BIN)/python -c "from genlab.analyses.dimension.neighbors import compile_kernels; compile_kernels()"
	touch $@

install: $(VENV)/.installed

reproduce: install
	mkdir -p $(HOME)/.cache/genlab/dvc-remote   # the default DVC remote (.dvc/config)
	snakemake --cores all
	@genlab claims reports/claims.json
	@echo "Report: $(CURDIR)/reports/index.html (claims: reports/claims.json)"

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check src tests benchmarks
	snakemake --lint

schema: install
	$(BIN)/genlab schema

clean:
	rm -rf data reports logs .snakemake
