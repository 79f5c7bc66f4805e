# Two commands matter: `make lab` opens the course, `make test` runs every check.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: lab test test-fast lint exercises demo bench bench-gpu bench-peers clean

$(STAMP): pyproject.toml tools/install_torch.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	./tools/install_torch.sh $(PY)
	$(PY) -m pip install -q -e '.[engine,lab,dev]'
	touch $(STAMP)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=. $$( [ "$$(id -u)" = 0 ] && echo --allow-root ) \
	  $(LAB_ARGS) exercises/01_weight_cache.ipynb

test: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks tools
	$(VENV)/bin/mypy
	$(PY) tools/notebooks.py --check
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-$$( [ -n "$$CI" ] && echo thorough || echo dev )} \
	  $(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not notebooks and not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks tools
	$(VENV)/bin/ruff format --check src tests benchmarks tools
	$(VENV)/bin/mypy

exercises: $(STAMP)
	$(PY) tools/notebooks.py --write

demo: $(STAMP)
	$(PY) -m servelab demo

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

# The real peers (nano-vllm, vLLM v1) live in their own environment, never the course's.
PEERS    := benchmarks/.peers-venv
PEERS_PY := $(PEERS)/bin/python

$(PEERS)/.installed: benchmarks/peers-requirements.txt tools/install_torch.sh
	test -x $(PEERS_PY) || $(PYTHON) -m venv $(PEERS)
	./tools/install_torch.sh $(PEERS_PY)
	$(PEERS_PY) -m pip install -q --no-deps -r benchmarks/peers-requirements.txt
	touch $@

bench-peers: $(PEERS)/.installed
	$(PEERS_PY) benchmarks/bench_blocks.py
	$(PEERS_PY) benchmarks/bench_scheduler.py

bench-gpu: $(STAMP)
	$(PY) benchmarks/gpu.py --out benchmarks/gpu-results.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
