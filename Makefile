# One command per chore. `make run` serves on the embedded SQLite default; `make test` runs
# the whole suite. Both create the virtual environment and install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint migrate bench clean

$(STAMP): pyproject.toml clients/python/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' -e ./clients/python
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/toolgate serve

migrate: $(STAMP)
	$(BIN)/toolgate migrate

test: $(STAMP)
	$(BIN)/python -m pytest tests clients/python/tests

lint: $(STAMP)
	$(BIN)/ruff check app toolgate_uvicorn tests migrations clients/python bench

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) toolgate.db toolgate.db-wal toolgate.db-shm
