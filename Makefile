# Quick start: `make demo` (smoke run on generated data with a tiny random model) and `make test`.
# Both create .venv and install the package into it first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install install-rl test eval-smoke demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# The real verl and OpenRLHF for tests/test_rewards_verl.py and tests/test_rewards_openrlhf.py, installed
# beside this package's torch and transformers WITHOUT their own dependencies (vLLM, DeepSpeed and their
# transformers pins: verl <5.11, OpenRLHF ==5.15.0); the light packages their reward paths import come
# from the test-rl extra. README, "RL rewards", says what this means for users.
RL_STAMP := $(VENV)/.installed-rl
RL_FRAMEWORKS := verl==0.9.1 openrlhf==0.11.2 tensordict==0.10.0

$(RL_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,test-rl]'
	$(PY) -m pip install --quiet --no-deps $(RL_FRAMEWORKS)
	touch $(RL_STAMP)

install-rl: $(RL_STAMP)

test: $(STAMP) $(RL_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest

# Every eval/ script whose figure the README or docs/ quote, at a small size, each failing on its own checks
# (eval/smoke.py lists them); a few minutes on 2 cores.
eval-smoke: $(STAMP)
	$(PY) eval/smoke.py

demo: $(STAMP)
	$(VENV)/bin/adaptrubric demo --out runs/demo

clean:
	rm -rf runs .pytest_cache
