# Switchboard: `make run` to try it, `make test` before you push.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := .venv
PY := $(VENV)/bin/python
# Reinstall only when pyproject.toml changed since the last install. `make run` installs what
# running needs (the project's own dependencies); `make test` and the other targets add the
# dev extra (pytest, Playwright, hypothesis, schemathesis, ruff, the MCP client) on top.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
# When make started (make test's wall time, printed at its end).
MAKE_STARTED := $(shell date +%s)
# make test's xdist workers; TEST_WORKERS=0 runs everything in one process. Five on these 2 cores:
# the time-bound tests wait more than they compute, and a fifth worker fills those waits (three
# pairs of runs, 237-248 s against 251-260 s with four: docs/reliability.md, "The suite's time").
TEST_WORKERS ?= 5

.PHONY: help run test lint bench soak fuzz clean

help:
	@echo "make run    start Switchboard on http://127.0.0.1:8000/ (embedded PostgreSQL in ./var);"
	@echo "            make run PORT=8001 HOST=0.0.0.0 to listen elsewhere"
	@echo "make test   migrations check, ruff, and the whole test suite"
	@echo "make lint   ruff check and ruff format --check"
	@echo "make bench  the benchmarks in bench/, ours next to Procrastinate, one summary table"
	@echo "make soak   the long crash runs: long-polls through ten PostgreSQL stops, a Patroni failover"
	@echo "make fuzz   the long fuzzing pass of the agent API (SWITCHBOARD_FUZZ_EXAMPLES, 500 a verb)"
	@echo "make clean  remove the virtualenv, caches and collected static files (keeps ./var)"

# Python >= 3.12: pyenv's 3.12 (this repo's .python-version), python3.12 on PATH, any
# ~/.pyenv 3.12, else python3 if it is new enough.
$(PY):
	@python="$$(pyenv which python3.12 2>/dev/null || command -v python3.12 || true)"; \
	if [ -z "$$python" ]; then python="$$(ls -d $$HOME/.pyenv/versions/3.12*/bin/python 2>/dev/null | sort -V | tail -n 1)"; fi; \
	if [ -z "$$python" ] && python3 -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then python="$$(command -v python3)"; fi; \
	if [ -z "$$python" ]; then \
	  echo "make: Switchboard needs Python 3.12 or newer, and none was found" >&2; \
	  echo "      (tried: pyenv which python3.12, python3.12 on PATH, ~/.pyenv/versions/3.12*, python3)." >&2; \
	  echo "      Install it, e.g. 'pyenv install 3.12', and run make again." >&2; \
	  exit 1; \
	fi; \
	echo "Creating $(VENV) with $$python"; \
	"$$python" -m venv $(VENV)

# Installs go through uv (from PyPI, into the virtualenv) where it can be had: the same packages
# from the same registry, byte-compiled as pip would, in 10 s where pip takes 36 s on a fresh
# clone (docs/reliability.md, "The suite's time"). Where uv cannot be installed or fails, pip does
# the install as before.
define install
	@if { [ -x $(VENV)/bin/uv ] || $(PY) -m pip install --quiet --disable-pip-version-check uv >/dev/null 2>&1; } \
	    && $(VENV)/bin/uv --version >/dev/null 2>&1; then \
	  echo "$(VENV)/bin/uv pip install $(1)"; \
	  $(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) $(1) \
	    || { echo "make: uv failed; installing with pip instead" >&2; $(PY) -m pip install --quiet $(1); }; \
	else \
	  echo "$(PY) -m pip install $(1)"; $(PY) -m pip install --quiet $(1); \
	fi
endef

# (A comma inside $(call …)'s arguments would split them, so the bench's extras come in a variable.)
BENCH_INSTALL := -e '.[dev,bench]'

$(RUN_STAMP): pyproject.toml | $(PY)
	$(call install,-e .)
	@touch $(RUN_STAMP)

# One install for both (the project's dependencies are the dev extra's too).
$(DEV_STAMP): pyproject.toml | $(PY)
	$(call install,-e '.[dev]')
	@touch $(RUN_STAMP) $(DEV_STAMP)

# `make run PORT=8001 HOST=0.0.0.0`: taken from make's command line only, never from the
# environment, where a shell's own HOST (tcsh exports the machine's name) or a PORT meant for
# another program would move the server without anyone asking.
RUN_ARGS = $(strip $(if $(filter command line,$(origin HOST)),--host '$(HOST)') \
	$(if $(filter command line,$(origin PORT)),--port '$(PORT)'))
run: $(RUN_STAMP)
	SWITCHBOARD_DEV=1 $(VENV)/bin/switchboard up $(RUN_ARGS)

# Python writes its bytecode caches (__pycache__/, ignored by git) under make test even where the
# shell says PYTHONDONTWRITEBYTECODE (this machine's does): the suite starts some 300 Python
# processes (the CLI, the relay, served processes) and five workers that each import every test
# module; without the caches each one compiles the project and rewrites the tests again.
test: export PYTHONDONTWRITEBYTECODE :=
test: $(DEV_STAMP)
	SWITCHBOARD_DEV=1 DJANGO_SETTINGS_MODULE=switchboard.settings_test $(PY) manage.py makemigrations --check --dry-run
	$(VENV)/bin/ruff check .
	@# Five xdist workers: the time-bound tests in two lanes (the crash tests, the rest), each
	@# one after another on a worker, the rest a file at a time beside them (tests/conftest.py);
	@# last, the wall time and the ten slowest tests (tests/timings.py). First, the test modules'
	@# rewritten asserts cached once, not by each worker (tests/assert_cache.py).
	@mkdir -p .pytest_cache; rm -f .pytest_cache/tests.xml; \
	$(PY) tests/assert_cache.py tests bench; \
	rc=0; $(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadscope --junitxml=.pytest_cache/tests.xml || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests; that is a failure." >&2; fi; \
	$(PY) tests/timings.py $(MAKE_STARTED) .pytest_cache/tests.xml; \
	exit $$rc

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	@# The django-stubs plugin loads switchboard.settings_test, which starts an embedded
	@# PostgreSQL unless DATABASE_URL names one; mypy connects to nothing, and an embedded server
	@# it started was left running after it.
	DATABASE_URL=postgresql://mypy@127.0.0.1:1/unused $(VENV)/bin/mypy

bench: $(DEV_STAMP)
	$(call install,$(BENCH_INSTALL))
	$(PY) -m bench.run

# The long crash runs: 1,000 long-polls through ten PostgreSQL stops, and a Patroni failover
# where patroni and etcd are installed. (The ten minutes of mixed load that came first are
# retired: docs/benchmarks.md, "Retired sections".)
soak: $(DEV_STAMP)
	SWITCHBOARD_CRASH_STOPS=10 SWITCHBOARD_CRASH_PATRONI=1 $(VENV)/bin/pytest -q -s \
	  tests/crash/test_patroni.py "tests/crash/test_database_restart.py::test_a_fleet_of_long_polls_rides_through_postgresql_stopping"

# The long pass of tests/fuzz (make test runs a bounded one): fresh random draws each run,
# against the tests' own embedded PostgreSQL and live server.
fuzz: $(DEV_STAMP)
	SWITCHBOARD_FUZZ_EXAMPLES=$${SWITCHBOARD_FUZZ_EXAMPLES:-500} $(VENV)/bin/pytest tests/fuzz -q

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache var/static staticfiles build dist *.egg-info
	find . -path ./var -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
