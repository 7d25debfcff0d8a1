# kernel-agent: `make test` and `make demo` do all the set-up on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
PYTEST_ARGS ?=
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test demo bench eval-analysis venv eg-venv lab-venv system-deps system-deps-chromium lint clean deno-kernel

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PIP) install -q -U pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(PIP) install -q -e '.[test,local]'
	$(PY) -m bash_kernel.install --sys-prefix >/dev/null
	touch $@

venv: $(VENV)/.installed

# Jupyter Enterprise Gateway for the tests (tests/gateway_server.py), in a venv of its
# own: it pins jupyter_server<2, jupyter_client<7 and pyzmq<25, which ours outgrew. Its
# kernels are ipykernels from $(VENV); the tests fail, not skip, once this has run.
EG_VENV ?= .venv-eg
EG_VERSION ?= 3.3.0

$(EG_VENV)/.installed:
	python3 -m venv $(EG_VENV)
	$(EG_VENV)/bin/python -m pip install -q -U pip
	$(EG_VENV)/bin/python -m pip install -q jupyter_enterprise_gateway==$(EG_VERSION)
	$(EG_VENV)/bin/jupyter enterprisegateway --version >/dev/null
	touch $@

eg-venv: $(EG_VENV)/.installed

# JupyterLab with real-time collaboration (and Jupyter AI's ACP client) for the
# --jupyter-url and acp tests (tests/jupyter/):
# the *server* side, in a venv of its own so the shared one is not disturbed; only the
# client libraries (pycrdt, jupyter-ydoc, websockets) are kernel-agent's dependencies.
LAB_VENV ?= .venv-lab

$(LAB_VENV)/.installed: pyproject.toml
	python3 -m venv $(LAB_VENV)
	$(LAB_VENV)/bin/python -m pip install -q -U pip
	$(LAB_VENV)/bin/python -m pip install -q 'jupyterlab>=4.2,<5' 'jupyter-collaboration>=3,<6' ipykernel pandas \
		'jupyter-ai-acp-client>=0.3,<0.4' 'jupyter-ai>=3,<4'
	# kernel-agent itself, as a JupyterLab user installs it: its persona's entry point
	$(LAB_VENV)/bin/python -m pip install -q -e .
	$(LAB_VENV)/bin/jupyter lab --version >/dev/null
	touch $@

lab-venv: $(LAB_VENV)/.installed

# bubblewrap and the sandbox user (see scripts/system-deps.sh); fast when done
system-deps:
	@sh scripts/system-deps.sh

# ruff (lint and format) on the code, mypy on the package; `make test` runs it first.
lint: venv
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy

test: lint system-deps system-deps-chromium deno-kernel eg-venv lab-venv
	EG_VENV=$(abspath $(EG_VENV)) LAB_VENV=$(abspath $(LAB_VENV)) $(PY) -m pytest $(PYTEST_ARGS)

# Deno's Jupyter kernel (TypeScript/JavaScript): the deno binary from npm's
# @deno/linux-x64-glibc, pinned; `deno jupyter --install` writes its kernelspec under
# $$HOME, so it runs with a scratch HOME and the spec is moved into the venv (sys-prefix).
DENO_VERSION ?= 2.9.6
DENO_PREFIX ?= .deno
DENO := $(DENO_PREFIX)/node_modules/@deno/linux-x64-glibc/deno
KERNELS_DIR ?= $(VENV)/share/jupyter/kernels

$(DENO):
	@command -v npm >/dev/null 2>&1 || { \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q npm; }
	npm install --no-save --no-package-lock --no-audit --no-fund --prefix $(DENO_PREFIX) \
		@deno/linux-x64-glibc@$(DENO_VERSION)
	chmod -R a+rX $(DENO_PREFIX)

$(KERNELS_DIR)/deno/kernel.json: $(DENO)
	@scratch=$$(mktemp -d) && \
	HOME=$$scratch $(abspath $(DENO)) jupyter --install --force >/dev/null 2>&1 && \
	mkdir -p $(KERNELS_DIR) && rm -rf $(KERNELS_DIR)/deno && \
	mv $$scratch/.local/share/jupyter/kernels/deno $(KERNELS_DIR)/deno && \
	rm -rf $$scratch && echo "deno kernelspec in $(KERNELS_DIR)/deno"

deno-kernel: $(KERNELS_DIR)/deno/kernel.json

# Headless Chromium renders exported notebooks (tests, PDF export): Debian's package;
# poppler-utils' pdftotext reads the PDFs back in the attack tests.
system-deps-chromium:
	@{ command -v chromium && command -v pdftotext; } >/dev/null 2>&1 || { \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q chromium poppler-utils; }

# Each benchmark prints ratios against a floor measured in the same run.
bench: venv system-deps
	$(PY) bench/bench_kernel.py
	$(PY) bench/bench_transcript.py
	$(PY) bench/bench_sandbox.py
	$(PY) bench/bench_gateway.py
	$(PY) bench/bench_transfer.py
	$(PY) bench/bench_gateway_pool.py
	$(PY) bench/bench_verify.py
	$(PY) bench/bench_mcp.py
	$(PY) bench/bench_serve.py
	$(PY) bench/bench_local_model.py
	$(PY) bench/bench_agent_loop.py
	$(PY) bench/bench_tools.py
	$(PY) bench/bench_tracing.py
	$(PY) bench/bench_unprivileged.py

# How often the bundled model solves simple analysis tasks (slow: minutes).
# The analysis eval (42 tasks, tuned and held-out halves) on the bundled model; EVAL_ARGS
# passes options, e.g. EVAL_ARGS="--levers none" for the plain loop, or --model/--base-url.
eval-analysis: venv system-deps
	$(PY) bench/eval_analysis.py $(EVAL_ARGS)

DEMO_TASK ?= Using the file macrodata.csv (statsmodels' US macro data, one row per quarter): which year had the highest average unemployment rate (column unemp, averaged over the year's quarters), and what was that average, rounded to 2 decimals? Also plot the yearly average unemployment rate as a line chart.

# the data: statsmodels ships it (nothing is downloaded); the kernel sees notebooks/
demo: venv system-deps
	mkdir -p notebooks
	$(PY) -c "import statsmodels.api as sm; sm.datasets.macrodata.load_pandas().data.to_csv('notebooks/macrodata.csv', index=False)"
	$(VENV)/bin/kernel-agent run --model local --temperature 0 --cwd notebooks --notebook notebooks/demo.ipynb "$(DEMO_TASK)"

clean:
	rm -rf $(VENV) $(EG_VENV) $(LAB_VENV) $(DENO_PREFIX) build dist src/*.egg-info
