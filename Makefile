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
	$(PIP) install -q -e '.[test]'
	$(PY) -m bash_kernel.install --sys-prefix >/dev/null
	touch $@

venv: $(VENV)/.installed

test: venv
	$(PY) -m pytest $(PYTEST_ARGS)

bench: venv
	$(PY) bench/bench_kernel.py
	$(PY) bench/bench_transcript.py

demo:
	@echo "make demo waits for the bundled local model (issue: embedded default); not there yet."

clean:
	rm -rf $(VENV) build dist src/*.egg-info
