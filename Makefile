# Two entry points on a fresh machine: `make run` and `make test`.
# Both create .venv (Python >= 3.10) and install the pinned test extras.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint fuzz clean

$(STAMP): pyproject.toml
	$(PY) -c 'import sys; assert sys.version_info >= (3, 10), "tilewright needs Python >= 3.10"'
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python examples/00_conv2d_reference.py
	$(BIN)/python examples/02_tune_conv2d.py --trials 60
	$(BIN)/python examples/04_compile_model.py --model resnet18 --trials 120

lint: $(STAMP)
	$(BIN)/ruff check tilewright tests examples benchmarks

test: lint
	$(BIN)/pytest

# the long differential fuzz run (issue 13): random te programs x random schedules vs tw.evaluate
FUZZ_CASES ?= 10000
FUZZ_SEED ?= 1
fuzz: $(STAMP)
	$(BIN)/python -m tests.reliability.fuzz_programs --cases $(FUZZ_CASES) --seed $(FUZZ_SEED) --jobs 2

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
