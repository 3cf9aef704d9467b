# Forge — the two commands a newcomer runs: `make demo` and `make test`.
# Each creates .venv when it is missing and installs the project into it.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The verify circuit-breaker on a scratch repository: three failing verifies
# open it (exit 1), a human resets it, a fix makes it pass.
demo: $(STAMP)
	@set -e; scratch=$$(mktemp -d); forge=$$(pwd)/$(BIN)/forge; cd $$scratch; \
	git init -q; git config user.email demo@forge.invalid; git config user.name demo; \
	printf '[verify]\ncommand = "grep -q \\"return 42\\" answer.py"\nmax_failures = 3\n' > forge.toml; \
	printf 'def answer():\n    return 41\n' > answer.py; \
	git add -A; git commit -qm "scratch project"; \
	echo "== scratch repository: $$scratch"; echo "== forge.toml:"; cat forge.toml; \
	for attempt in 1 2 3; do \
	  echo; echo "\$$ forge verify --change checkout   # attempt $$attempt"; \
	  $$forge verify --change checkout && code=0 || code=$$?; echo "# exit $$code"; \
	done; \
	echo; echo "\$$ forge verify --reset-breaker --change checkout"; $$forge verify --reset-breaker --change checkout; \
	printf 'def answer():\n    return 42\n' > answer.py; \
	echo; echo "\$$ forge verify --change checkout   # after the fix"; $$forge verify --change checkout; echo "# exit $$?"; \
	echo; echo "\$$ forge timeline checkout"; $$forge timeline checkout --plain; \
	echo; echo "== state: $$scratch/.forge/changes/checkout/verify-attempts.yaml"; \
	cat .forge/changes/checkout/verify-attempts.yaml; rm -rf $$scratch

test: lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check orchestra tests
	$(BIN)/ruff format --check orchestra tests

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q -n auto

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
