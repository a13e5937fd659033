# Shardline: `make run` and `make test` are the two commands in README.md; `make docs` builds docs/.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=
# pytest-xdist processes for `make test`: each has its own test database,
# server processes and Celery queue. Most tests wait on real servers and
# processes, so with two a quarter of 2 cores stayed idle; three keep them
# busy (bench/RESULTS.md), their servers sized to fit Postgres's 100
# connections (tests/conftest.py). TEST_PROCESSES=0 runs it in one process.
TEST_PROCESSES ?= 3

.PHONY: venv run lint docs test test-unit test-embedded bench clean-embedded soak

venv: $(STAMP)

# Reinstalls only when pyproject.toml changes, so `make test` stays quick.
# Everything: the server, the SDK's TensorFlow and PyTorch integrations, the
# test tools and the docs site's (about 4 GB; the docs add a few MB, and the
# suite builds the docs to check that a broken link fails them).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[server,tables,tf,test,docs]'
	touch $(SERVER_STAMP) $(STAMP)

# The server alone (no TensorFlow, torch or test tools), with pip's progress:
# what `make run` needs on a new machine.
SERVER_STAMP := $(VENV)/.server-installed
$(SERVER_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@echo "== installing the server into $(VENV) (make test installs the rest) =="
	$(BIN)/python -m pip install --progress-bar on -e '.[server,tables]'
	touch $(SERVER_STAMP)

run: $(SERVER_STAMP)
	$(BIN)/python manage.py serve

# Pure logic, no servers: seconds.
test-unit: venv
	$(BIN)/python -m pytest tests/unit -q $(PYTEST_ARGS)

# The docs site in docs/_build/html: Markdown pages (MyST), the settings and
# API references generated from the code and the OpenAPI schema. Every warning
# is an error: a broken link or anchor, an unknown cross-reference, a setting
# read by the code and not described, a fault in the schema. -E: the generated
# pages are made again on every build.
docs: venv
	$(BIN)/sphinx-build -E -W --keep-going -n -b html docs docs/_build/html

# ruff: lint (pyflakes, pycodestyle, import order) and the formatter's check.
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The whole suite against DATABASE_URL (or the embedded Postgres when it is
# unset). When DATABASE_URL names a server, the smoke subset also runs against
# the embedded Postgres, so both set-ups are proven by one command.
test: venv
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) $(PYTEST_ARGS)
	@if [ -n "$$DATABASE_URL" ]; then \
		echo "== smoke subset against the embedded Postgres =="; \
		env -u DATABASE_URL $(BIN)/python -m pytest -m smoke $(PYTEST_ARGS); \
	fi

test-embedded: venv
	env -u DATABASE_URL $(BIN)/python -m pytest $(PYTEST_ARGS)

# The chaos tests, longer and repeated: SOAK_SCALE times the items of the
# worker-kill run (one kill a second throughout), SOAK_ROUNDS rounds.
SOAK_SCALE ?= 6
SOAK_ROUNDS ?= 3
soak: venv
	for round in $$(seq $(SOAK_ROUNDS)); do \
		echo "== soak round $$round of $(SOAK_ROUNDS) =="; \
		SHARDLINE_CHAOS_SCALE=$(SOAK_SCALE) $(BIN)/python -m pytest tests/chaos -q -s $(PYTEST_ARGS) || exit 1; \
	done

bench: venv
	$(BIN)/python bench/dispatch.py

clean-embedded: venv
	$(BIN)/python manage.py embedded_pg stop
	rm -rf .shardline
