# One command per chore. `make run` serves on the embedded SQLite default; `make test` runs
# the whole suite (`make test-fast`: all but the slow end-to-end tests). They create the
# virtual environment and install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-fast lint migrate bench clean

$(STAMP): pyproject.toml clients/python/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' -e ./clients/python
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/toolgate serve

migrate: $(STAMP)
	$(BIN)/toolgate migrate

PYTEST := $(BIN)/python -m pytest

# Two runs that between them hold every test once: first all but the tests marked `slow`
# (pyproject.toml: end to end, real `toolgate serve` processes started and killed), then
# those. Either failing fails `make test` (make stops at the first failing line). Exit 5,
# no test selected, fails the first run; the second's is no failure: with no test marked
# slow, every test has run in the first.
test: $(STAMP)
	$(PYTEST) -m "not slow" tests clients/python/tests
	$(PYTEST) -m slow tests || [ $$? -eq 5 ]

test-fast: $(STAMP)
	$(PYTEST) -m "not slow" tests clients/python/tests

lint: $(STAMP)
	$(BIN)/ruff check app toolgate_uvicorn tests migrations clients/python bench

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) toolgate.db toolgate.db-wal toolgate.db-shm
