# Every target bootstraps its own virtual environment from nothing but python3.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-busy test-long lint types unit proto proto-check bench dist clean screenshots \
	chromium squid

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,gcp,aws]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/rungar demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python tools/check_layers.py

types: $(STAMP)
	$(BIN)/mypy rungar providers tests benchmarks tools

proto: $(STAMP)
	$(BIN)/python tools/gen_proto.py

proto-check: $(STAMP)
	$(BIN)/python tools/gen_proto.py --check

# PYTEST_ARGS adds pytest options, e.g. make test PYTEST_ARGS=--durations=10. The tests run in
# three worker processes (TEST_WORKERS) on two CPUs: most of them wait on processes, sockets,
# the disk and the clocks they configure, so two workers left the CPUs idle more than half the
# run (docs/benchmarks.md, "The default test run"). TEST_WORKERS=0 runs them in this process.
# --dist worksteal: a worker that runs out of tests takes another's, so the long end-to-end
# tests, neighbours by name, do not all wait on one worker while the other sits idle.
# The tests start hundreds of Python processes (daemons, plugins, fake runners, the CLI): they
# write the bytecode cache even where PYTHONDONTWRITEBYTECODE is set, so each of Rungar's
# modules is compiled once rather than in every process (__pycache__ is ignored by git).
TEST_WORKERS ?= 3
unit: chromium squid $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q -m "not long" -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# The browser tests drive the system's Chromium: found, or installed (Debian's chromium, as root
# with apt-get), or make stops here with the one command to run. Needs only python3.
chromium:
	@$(PYTHON) tools/ensure_chromium.py

# The proxy tests run Debian's squid as a real forward proxy: found, or installed (as root with
# apt-get), or make stops here with the one command to run. Needs only python3.
squid:
	@$(PYTHON) tools/ensure_squid.py

# The browser first, before anything is built or run; then lint (seconds); then types and the
# tests side by side: mypy is single-threaded and takes a minute or two with no cache, as on a
# fresh clone.
test: chromium squid
	$(MAKE) --no-print-directory lint proto-check
	$(MAKE) --no-print-directory -j2 types unit

# make test three times in a row beside two busy loops (BUSY_LOOPS, one per CPU), as on a
# machine where others build: no test may need a quiet machine. The loops are killed however
# the runs end. docs/testing.md says more.
BUSY_LOOPS ?= 2
BUSY_RUNS ?= 3
test-busy: chromium squid $(STAMP)
	@$(PYTHON) tools/busy_test.py --loops $(BUSY_LOOPS) --runs $(BUSY_RUNS) -- $(MAKE) --no-print-directory test

# Everything, the tests marked `long` included, with the soaks at full size, on TEST_WORKERS
# workers as make test (one worker takes well over an hour).
test-long: chromium squid $(STAMP)
	RUNGAR_SIM_SEEDS=2000 RUNGAR_SIM_STEPS=5000 RUNGAR_CRASH_TRIALS=2000 RUNGAR_VIRTUAL_SEEDS=200 \
	RUNGAR_KILL_TRIALS=200 RUNGAR_KILL_JOBS=500 RUNGAR_FUZZ_EXAMPLES=300 PYTHONDONTWRITEBYTECODE= \
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# The dashboards' pictures in docs/screenshots/, taken by the browser tests in a real Chromium.
screenshots: chromium $(STAMP)
	RUNGAR_SCREENSHOTS=docs/screenshots $(BIN)/pytest -q -m screenshot tests/browser

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

# A wheel and an sdist in dist/, built offline with the environment's own setuptools.
dist: $(STAMP)
	rm -rf dist build
	$(BIN)/python tools/build_dist.py dist

clean:
	rm -rf $(VENV) build dist *.egg-info
