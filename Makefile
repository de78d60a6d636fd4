# Every target makes .venv on first use; later runs reuse it (the stamp tracks pyproject.toml).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench lint clean

$(VENV)/bin/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed-dev: pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

$(VENV)/.installed-bench: pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install -q -e '.[dev,bench]'
	touch $@

demo: $(VENV)/.installed-bench
	$(BIN)/python -m ragsched.demo

test: $(VENV)/.installed-dev
	OMP_WAIT_POLICY=passive $(BIN)/python -m pytest -n 2 tests

bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks
	$(BIN)/python -m benchmarks.ragged

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check ragsched pipelines benchmarks tests

clean:
	rm -rf $(VENV) build *.egg-info
