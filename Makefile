# kernel-agent: `make test` and `make demo` do all the set-up on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
PYTEST_ARGS ?=
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test demo bench eval-local venv system-deps system-deps-chromium lint clean

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PIP) install -q -U pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(PIP) install -q -e '.[test,local]'
	$(PY) -m bash_kernel.install --sys-prefix >/dev/null
	touch $@

venv: $(VENV)/.installed

# bubblewrap and the sandbox user (see scripts/system-deps.sh); fast when done
system-deps:
	@sh scripts/system-deps.sh

# ruff (lint and format) on the code, mypy on the package; `make test` runs it first.
lint: venv
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy

test: lint system-deps system-deps-chromium
	$(PY) -m pytest $(PYTEST_ARGS)

# Headless Chromium renders exported notebooks (tests, PDF export): Debian's package.
system-deps-chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q chromium; }

# Each benchmark prints ratios against a floor measured in the same run.
bench: venv system-deps
	$(PY) bench/bench_kernel.py
	$(PY) bench/bench_transcript.py
	$(PY) bench/bench_sandbox.py
	$(PY) bench/bench_gateway.py
	$(PY) bench/bench_verify.py
	$(PY) bench/bench_mcp.py
	$(PY) bench/bench_serve.py
	$(PY) bench/bench_local_model.py
	$(PY) bench/bench_agent_loop.py
	$(PY) bench/bench_tracing.py

# How often the bundled model solves simple analysis tasks (slow: minutes).
eval-local: venv system-deps
	$(PY) bench/eval_local_model.py

DEMO_TASK ?= Make a small dataset: a pandas DataFrame with a column n holding the integers 1 to 10 and a column square holding n squared. Compute the sum of the squares, plot square against n as a line chart, and tell me the sum.

demo: venv system-deps
	mkdir -p notebooks
	$(VENV)/bin/kernel-agent run --model local --temperature 0 --cwd notebooks --notebook notebooks/demo.ipynb "$(DEMO_TASK)"

clean:
	rm -rf $(VENV) build dist src/*.egg-info
