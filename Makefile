# Forge — the two commands a newcomer runs: `make demo` and `make test`.
# Each creates .venv when it is missing and installs the project into it.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The real agent CLIs the shipped executors are proven with (tests/test_real_*),
# at the releases their executors/<name>.toml [cli] tables pin.
AGENT_CLIS := $(VENV)/agent-clis
AGENT_STAMP := $(AGENT_CLIS)/.installed
# bubblewrap: the sandbox every executor runs in (tests/test_sandbox_e2e.py).
SANDBOX_STAMP := $(VENV)/.bubblewrap
# zsh and fish, the shells forge completion writes for besides bash.
SHELLS_STAMP := $(VENV)/.shells

.PHONY: demo screenshot test lint typecheck pytest bench reliability docs clean

$(STAMP): pyproject.toml
	@echo "setting up $(VENV) (once): Forge and its test tools"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

# The supervisor over the demo loops declared in forge.toml, driven by the
# bundled fake agent (no API key): one loop finishes, one's verify keeps failing
# until its circuit opens and escalates, one spins until stagnation opens its circuit,
# one deletes a protected file (restored; it escalates), all under one small
# rate limit. The demo's earlier state is cleared first. It ends by naming the
# morning report (forge report) written next to the run's summary.
demo: $(STAMP)
	@git worktree prune; for change in demo-checkout demo-billing demo-search demo-docs; do \
	  git worktree remove --force .forge/worktrees/$$change 2>/dev/null; \
	  git branch -D forge/$$change >/dev/null 2>&1; \
	  rm -rf .forge/changes/$$change; \
	done; true
	@$(BIN)/forge supervise; code=$$?; \
	echo; echo "forge supervise exited $$code (1: not every loop ended done — by design here)"; \
	echo "next: $(BIN)/forge status   ·   $(BIN)/forge timeline demo-billing   ·   $(BIN)/forge report --open"; \
	echo "report: $(CURDIR)/$$(ls -1d .forge/runs/*/ | tail -n 1)report.html"

# docs/report.png, the README's picture of the report: the demo's, as headless
# chromium draws it (apt-get install chromium).
screenshot: demo
	@command -v chromium >/dev/null || { echo "make screenshot needs chromium (apt-get install -y chromium)"; exit 2; }
	profile=$$(mktemp -d); \
	chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
	  --disable-component-update --disable-sync --no-first-run --hide-scrollbars --virtual-time-budget=3000 \
	  --user-data-dir=$$profile --window-size=1000,1400 --screenshot=docs/report.png \
	  "file://$(CURDIR)/$$(ls -1d .forge/runs/*/ | tail -n 1)report.html" 2>/dev/null; \
	code=$$?; rm -rf $$profile; test $$code -eq 0 && echo "wrote docs/report.png"

# Node.js and npm for the agent CLIs, from Debian's packages when missing.
$(AGENT_STAMP): $(STAMP) executors/claude.toml executors/codex.toml executors/gemini.toml
	@command -v npm >/dev/null || { \
	  test "$$(id -u)" -eq 0 || { echo "the agent CLIs need Node.js and npm (apt-get install -y nodejs npm)"; exit 2; }; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; }
	$(BIN)/python -m orchestra._scripted install $(AGENT_CLIS)
	touch $(AGENT_STAMP)

# bubblewrap, the sandbox around every executor, from Debian's package when missing.
$(SANDBOX_STAMP): $(STAMP)
	@command -v bwrap >/dev/null || { \
	  test "$$(id -u)" -eq 0 || { echo "the sandbox tests need bubblewrap (apt-get install -y bubblewrap)"; exit 2; }; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; }
	touch $(SANDBOX_STAMP)

test: lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check orchestra tests
	$(BIN)/ruff format --check orchestra tests

typecheck: $(STAMP)
	$(BIN)/mypy

# zsh and fish: forge completion's scripts are tested in each real shell.
$(SHELLS_STAMP): $(STAMP)
	@command -v zsh >/dev/null && command -v fish >/dev/null || { \
	  test "$$(id -u)" -eq 0 || { echo "the completion tests need zsh and fish (apt-get install -y zsh fish)"; exit 2; }; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zsh fish; }
	touch $(SHELLS_STAMP)

pytest: $(STAMP) $(AGENT_STAMP) $(SANDBOX_STAMP) $(SHELLS_STAMP)
	$(BIN)/pytest -q -n auto

# Performance, measured against a baseline in the same run (not part of make test).
bench: $(STAMP)
	$(BIN)/python bench/supervisor_overhead.py
	$(BIN)/python bench/hook_latency.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/secscan_engine.py
	$(BIN)/python bench/secscan_compare.py
	$(BIN)/python bench/redaction.py
	$(BIN)/python bench/memory.py
	$(BIN)/python bench/limiter.py
	$(BIN)/python bench/fleet.py
	$(BIN)/python bench/integrity_check.py
	$(BIN)/python bench/history.py

# The slow fault-injection tier: hundreds of kill -9 trials, crash points at
# every state write, hypothesis over bad input (the fast tier is in make test).
reliability: $(STAMP)
	$(BIN)/pytest -q -n auto -m reliability tests/reliability

# Regenerate what is generated from the policy model: policies/default.toml,
# policies/forge.schema.json and the key tables of docs/policy.md (tests fail
# while any is stale).
docs: $(STAMP)
	$(BIN)/forge policy dump --defaults --schema ./forge.schema.json -o policies/default.toml
	$(BIN)/forge policy schema -o policies/forge.schema.json
	$(BIN)/python -m orchestra._policy docs/policy.md

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
