# Two commands for a fresh machine with Python 3 and make:
#   make lab   - virtual environment, install, JupyterLab on notebooks/
#   make test  - same set-up, then doctests, tests/ and every notebook under nbval (strict)
# Also: make test-e2e (notebooks live in JupyterLab + Chromium), make bench (speed vs torch),
#       make html (the executed notebooks as a static site), make figures (every figure as SVG + PNG),
#       make goldens (regenerate the golden vectors from the real libraries)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ALLOW_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
# nbval in strict mode; --nbval-rerun-cells (conftest.py) also runs each cell a second time in
# nbval's kernel, so one execution per notebook checks both its outputs and its order independence.
NBVAL := --nbval --nbval-current-env --nbval-cell-timeout=300 --nbval-sanitize-with notebooks/nbval_sanitize.cfg --nbval-rerun-cells

.PHONY: setup test test-code test-notebooks test-e2e test-live lab bench bench-catch-up html figures goldens clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -e '.[notebooks,test]'
	@touch $(STAMP)

setup: $(STAMP)

# The code's tests and the notebooks run side by side, one process per core; each part's
# output is printed whole when it ends.
test: $(STAMP)
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-code test-notebooks

test-code: $(STAMP)
	$(BIN)/python -m pytest -m "not e2e" --doctest-modules sparse_opt tests

test-notebooks: $(STAMP)
	$(BIN)/python -m pytest notebooks $(NBVAL)

test-e2e: $(STAMP)
	$(BIN)/python -m pip install -e '.[e2e]'
	$(BIN)/python -m pytest -m e2e tests/e2e -q

# make test-live: the conformance checks against the real libraries, in their own environment: torch 2.13.0
# (CPU), fbgemm-gpu-cpu 1.8.0 (the build that loads beside it; 1.9.0 needs torch 2.14) and torchrec 1.8.0
# installed --no-deps (its metadata pulls the 498 MB CUDA fbgemm-gpu) with the few packages it needs.
# Runs torch, FBGEMM, TorchRec (one process and two) live; TensorFlow where it is installed (skipped here).
# Also DENSE_EQUIVALENT against torch's Adam, AdamW and SGD under random schedules, long runs against an exact
# (mpmath) oracle (test_torch_live_schedules.py).
LIVE_VENV ?= .venv-live
LIVE_STAMP := $(LIVE_VENV)/.installed
LIVE_TESTS := tests/test_conformance_libraries.py tests/test_conformance_fbgemm.py tests/test_conformance_torchrec.py \
	tests/test_torch_live_schedules.py
$(LIVE_STAMP): pyproject.toml
	@test -x $(LIVE_VENV)/bin/python || $(PYTHON) -m venv $(LIVE_VENV)
	$(LIVE_VENV)/bin/python -m pip install torch==2.13.0 fbgemm-gpu-cpu==1.8.0 tensordict==0.15.3 \
		torchmetrics==1.0.3 tqdm pyre-extensions "pytest>=8.0" "hypothesis>=6.100" "mpmath>=1.3"
	$(LIVE_VENV)/bin/python -m pip install --no-deps torchrec==1.8.0
	$(LIVE_VENV)/bin/python -m pip install --no-deps -e .
	@touch $(LIVE_STAMP)

test-live: $(LIVE_STAMP)
	$(LIVE_VENV)/bin/python -m pytest -q -rs -p no:cacheprovider $(LIVE_TESTS)

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ALLOW_ROOT)

# make bench [BENCH_PYTHON=/path/to/python] [BENCH_ARGS="--quick"]: the benchmark with .venv's Python
# (sparse_opt alone) or with another one (a Python with torch adds torch's optimizers; sparse_opt is
# taken from this checkout, numpy is all it needs besides), at full size or with the script's options.
BENCH_PYTHON ?=
BENCH_ARGS ?=
bench: $(if $(BENCH_PYTHON),,$(STAMP))
	PYTHONPATH="$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH}" $(or $(BENCH_PYTHON),$(BIN)/python) benchmarks/bench_sparse_step.py $(BENCH_ARGS)

# make bench-catch-up [BENCH_ARGS="--quick"]: DENSE_EQUIVALENT's catch-up cost over gradient scale x beta1 x beta2
# x gap, as ratios to DORMANCY_DECAY in one interleaved run (numpy only; results in benchmarks/RESULTS.md).
bench-catch-up: $(STAMP)
	PYTHONPATH="$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH}" $(BIN)/python benchmarks/bench_catch_up_cost.py $(BENCH_ARGS)

html: $(STAMP)
	$(BIN)/python docs/build_html.py build/html

# Seconds each notebook may take in make figures (a notebook past it is reported and the rest exported).
FIGURES_TIME_LIMIT ?= 900
figures: $(STAMP)
	$(BIN)/python docs/export_figures.py --time-limit $(FIGURES_TIME_LIMIT) build/figures

# Regenerate the golden vectors and the conformance recordings: needs torch==2.13.0 (TORCH_PYTHON)
# and tensorflow-cpu==2.21.0 + lingvo==0.14.2 (TF_PYTHON) in their own environments, each with
# this package installed (pip install -e . --no-deps).
TORCH_PYTHON ?= python3
TF_PYTHON ?= python3
goldens:
	$(TORCH_PYTHON) tests/golden/make_torch_adam.py
	$(TORCH_PYTHON) tests/golden/make_torch_adafactor.py
	$(TORCH_PYTHON) tests/golden/make_torch_round2.py
	$(TORCH_PYTHON) tests/golden/make_torch_schedules.py
	$(TORCH_PYTHON) tests/golden/make_torch_lowp.py
	$(TF_PYTHON) tests/golden/make_lingvo_egdd.py
	$(TORCH_PYTHON) tests/conformance/make_recordings.py
	$(TF_PYTHON) tests/conformance/make_recordings.py

clean:
	rm -rf $(VENV) $(LIVE_VENV) .pytest_cache .hypothesis artifacts build
