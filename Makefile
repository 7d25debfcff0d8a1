# kernel-agent: `make test` and `make demo` do all the set-up on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
PYTEST_ARGS ?=

.PHONY: test demo bench venv system-deps lint clean

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PIP) install -q -U pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(PIP) install -q -e '.[test,local]'
	$(PY) -m bash_kernel.install --sys-prefix >/dev/null
	touch $@

venv: $(VENV)/.installed

test: venv
	$(PY) -m pytest $(PYTEST_ARGS)

bench: venv
	$(PY) bench/bench_kernel.py

DEMO_TASK ?= Make a small dataset: a pandas DataFrame with a column n holding the integers 1 to 10 and a column square holding n squared. Compute the sum of the squares, plot square against n as a line chart, and tell me the sum.

demo: venv
	mkdir -p notebooks
	$(VENV)/bin/kernel-agent run --model local --temperature 0 --notebook notebooks/demo.ipynb "$(DEMO_TASK)"

clean:
	rm -rf $(VENV) build dist src/*.egg-info
