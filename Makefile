# Two commands matter: `make lab` opens the course, `make test` runs every check.
# `make lab` installs only what the course notebooks need (no torch, no dev tools), so a
# learner is in JupyterLab quickly; `make test` installs everything, torch included.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LAB_STAMP := $(VENV)/.lab-installed
TRITON_STAMP := $(VENV)/.triton-installed

.PHONY: lab lab-install torch triton test test-fast lint exercises progress slides lite links demo bench bench-gpu bench-peers clean compiled test-compiled bench-compiled bench-peers-compiled bench-builds

$(STAMP): pyproject.toml tools/install_torch.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	./tools/install_torch.sh $(PY)
	$(PY) -m pip install -q -e '.[engine,lab,kernel,dev]'
	touch $(STAMP) $(LAB_STAMP) $(TRITON_STAMP)

$(LAB_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[lab]'
	touch $(LAB_STAMP)

lab-install: $(LAB_STAMP)

# torch for the capstone (notebook 09), which serves the model; notebooks 01-05 need none, so
# `make lab` leaves it out. Keeps a torch that imports; CUDA build with an NVIDIA driver, else
# the CPU build (about 200 MB to download, where the wheel is not on local disk).
torch: $(LAB_STAMP)
	./tools/install_torch.sh $(PY)

# Notebook 08 needs torch and Triton, which `make lab` leaves out (Triton alone is ~290 MB to
# download): this adds them to the course's environment (torch as tools/install_torch.sh picks it).
$(TRITON_STAMP): $(LAB_STAMP) tools/install_torch.sh
	./tools/install_torch.sh $(PY)
	$(PY) -m pip install -q -e '.[lab,engine,kernel]'
	touch $(TRITON_STAMP)

triton: $(TRITON_STAMP)

# The course's Lab settings are in .jupyter/labconfig (no news toast over grade output); they
# are defaults, so a learner's own settings still win. default_url is the URL the server prints
# and opens, so with --no-browser too the printed link opens notebook 01, not the Launcher.
FIRST_NOTEBOOK := exercises/01_weight_cache.ipynb
lab: $(LAB_STAMP)
	JUPYTER_CONFIG_PATH="$(CURDIR)/.jupyter$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	  $(VENV)/bin/jupyter lab --notebook-dir=. $$( [ "$$(id -u)" = 0 ] && echo --allow-root ) \
	  --LabApp.default_url=/lab/tree/$(FIRST_NOTEBOOK) --LabApp.news_url=None $(LAB_ARGS)

# The browser tests include the JupyterLite site: pytest runs `make lite` and `make lab` in a clean
# clone of this checkout's HEAD (about 2 min with the clone's .venv; the site needs npm and PyPI,
# and its test is skipped with the reason when they cannot be reached).
# pytest runs on every core (at most 4 workers), a test file per worker at a time, so files that
# share a fixture (the Lab server, the Lite site) or a notebook keep them in one process.
XDIST := -n auto --maxprocesses=4 --dist loadfile
test: $(STAMP)
	./tools/install_chromium.sh
	$(VENV)/bin/ruff check src tests benchmarks tools
	$(VENV)/bin/mypy
	$(PY) tools/notebooks.py --check
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-$$( [ -n "$$CI" ] && echo thorough || echo dev )} \
	  $(PY) -m pytest -q $(XDIST)
	@if $(HAVE_CC); then $(MAKE) --no-print-directory test-compiled; \
	  else echo "no C compiler or Python headers: the compiled build is not built or tested"; fi

# The compiled build (see hatch_build.py): the same hot modules compiled by mypyc, as a wheel
# built with SERVELAB_COMPILE=1 and installed into build/compiled, never beside the sources.
# It is rebuilt whenever a source changes, and refuses to import if its sources changed since.
COMPILED := build/compiled
HAVE_CC  := $(PY) -c "import os, shutil, sys, sysconfig; \
  cc = (sysconfig.get_config_var('CC') or 'cc').split()[0]; \
  h = os.path.join(sysconfig.get_paths()['include'], 'Python.h'); \
  sys.exit(0 if shutil.which(cc) and os.path.exists(h) else 1)"
$(COMPILED)/.built: $(STAMP) hatch_build.py $(shell find src/servelab -name '*.py')
	rm -rf $(COMPILED) build/wheels/compiled
	SERVELAB_COMPILE=1 $(PY) -m pip wheel -q --no-deps --no-build-isolation \
	  -w build/wheels/compiled .
	$(PY) -m pip install -q --no-deps --target $(COMPILED) build/wheels/compiled/servelab-*.whl
	touch $@

compiled: $(COMPILED)/.built

# The reference tests of the compiled modules, run against the compiled build (dev profile),
# and the CLI grader's isolated child, which must load the build's mypyc runtime by its path.
COMPILED_TESTS := tests/test_native.py tests/test_blocks.py tests/test_append_slots.py \
  tests/test_prefix.py tests/test_scheduler.py tests/test_weight_cache.py \
  tests/test_weight_cache_faults.py tests/test_policies.py tests/test_sim.py tests/test_sim_drift.py \
  tests/test_grading_weight_cache.py::test_cli_exit_codes
test-compiled: $(COMPILED)/.built
	SERVELAB_EXPECT_BUILD=compiled PYTHONPATH=$(CURDIR)/$(COMPILED) \
	  HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE_COMPILED:-dev} \
	  $(PY) -m pytest -q $(XDIST) $(COMPILED_TESTS)

test-fast: $(STAMP)
	$(PY) -m pytest -q $(XDIST) -m "not notebooks and not slow and not browser"

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks tools
	$(VENV)/bin/ruff format --check src tests benchmarks tools
	$(VENV)/bin/mypy

exercises: $(STAMP)
	$(PY) tools/notebooks.py --write

# Run your exercise notebooks headless and print a table of every step (see README).
progress: $(LAB_STAMP)
	$(VENV)/bin/servelab progress exercises $(PROGRESS_ARGS)

# reveal.js slides of the lecture and solution notebooks, in build/slides/ (open the .html).
slides: $(LAB_STAMP)
	$(PY) tools/slides.py --out build/slides

# A JupyterLite site (the exercises in the browser, nothing installed) in build/lite/.
lite: $(LAB_STAMP)
	./tools/build_lite.sh $(PY) build/lite

# The GitHub repository the Binder and Colab links name (badges and each notebook's Colab cell):
# `make links REPO=org/name` sets it, `make links` prints it.
links:
	$(PYTHON) tools/links.py $(REPO)

demo: $(STAMP)
	$(PY) -m servelab demo

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

bench-compiled: $(COMPILED)/.built
	PYTHONPATH=$(CURDIR)/$(COMPILED) $(PY) benchmarks/run_all.py

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

# The compiled build was made for the course's Python, which the peers' environment shares.
bench-peers-compiled: $(PEERS)/.installed $(COMPILED)/.built
	PYTHONPATH=$(CURDIR)/$(COMPILED) $(PEERS_PY) benchmarks/bench_blocks.py
	PYTHONPATH=$(CURDIR)/$(COMPILED) $(PEERS_PY) benchmarks/bench_scheduler.py

# Both builds against the same peers, back to back: each script runs once per build, with the
# same seeded traces, repetitions, warm-up and lock; each ratio is against the peer measured in
# that script's own run (one process cannot import both builds of a module). The scheduler runs
# a second time without a garbage collection before every timed step (for the peer too).
bench-builds: $(PEERS)/.installed $(COMPILED)/.built
	@for script in bench_blocks bench_scheduler; do for build in "" "$(CURDIR)/$(COMPILED)"; do \
	  PYTHONPATH="$$build" $(PEERS_PY) benchmarks/$$script.py $(BENCH_ARGS) || exit 1; done; done
	@for build in "" "$(CURDIR)/$(COMPILED)"; do \
	  PYTHONPATH="$$build" $(PEERS_PY) benchmarks/bench_scheduler.py --collect once || exit 1; done
	@for build in "" "$(CURDIR)/$(COMPILED)"; do \
	  PYTHONPATH="$$build" $(PY) benchmarks/bench_weight_cache.py --no-pins || exit 1; done
	@for build in "" "$(CURDIR)/$(COMPILED)"; do \
	  PYTHONPATH="$$build" $(PY) benchmarks/bench_sim.py || exit 1; done

bench-gpu: $(STAMP)
	$(PY) benchmarks/gpu.py --out benchmarks/gpu-results.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build test-artifacts
