# One command per chore. `make run` serves on the embedded SQLite default; `make test` runs
# the whole suite (`make test-fast`: all but the slow end-to-end tests). Both create the virtual environment and install exactly what uv.lock
# holds (uv, itself pinned here, is installed from PyPI into .uv/ the first time).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
UV_VERSION := 0.13.9
UV := .uv/bin/uv
# uv installs into $(VENV) with the interpreter above; it never downloads a Python.
export UV_PROJECT_ENVIRONMENT := $(VENV)
export UV_PYTHON_DOWNLOADS := never

.PHONY: install link run test test-fast test-ts lint lock migrate bench image clean

$(UV):
	$(PYTHON) -m venv .uv
	.uv/bin/python -m pip install --quiet uv==$(UV_VERSION)

# Re-installs whenever the lock or a pyproject changes. --locked: a pyproject whose
# dependencies no longer match uv.lock is an error (run `make lock`), never a silent
# re-resolution.
$(STAMP): uv.lock pyproject.toml clients/python/pyproject.toml | $(UV)
	$(UV) sync --locked --extra dev --python $(PYTHON)
	touch $(STAMP)

# `toolgate` on the PATH of every new shell (deploy/link-cli.sh): a link in the first
# writable folder of ~/.local/bin, /usr/local/bin that is on PATH, made again by every
# `make run`, `migrate` or `install` when it points elsewhere (another checkout's .venv);
# silent when it is already this one's. `make LINK=0 ...`: none.
LINK ?= 1
link: $(STAMP)
	@LINK=$(LINK) sh deploy/link-cli.sh $(BIN)/toolgate

run: link
	$(BIN)/toolgate serve

migrate: link
	$(BIN)/toolgate migrate

PYTEST := $(BIN)/python -m pytest

# Two runs that between them hold every test once: first all but the tests marked `slow`
# (pyproject.toml: end to end, real `toolgate serve` processes started and killed, image
# builds, the OpenAPI contract run), then those. Either failing fails `make test` (make
# stops at the first failing line). Exit 5, no test selected, fails the first run; the
# second's is no failure: with no test marked slow, every test has run in the first.
# The first runs on every core (pytest-xdist, -n auto): --dist loadgroup hands out single
# tests, so no worker idles while another finishes a big module; tests that share a module's
# or a session's fixture (a server, a browser) carry an xdist_group (tests/conftest.py) and
# stay on one worker, which sets it up once and runs them in order.
# The slow tests run one at a time: they start servers, browsers and CLIs, and measure
# deadlines and load that a second worker beside them would distort.
# --durations=25 prints the 25 slowest tests of each run.
XDIST := -n auto --dist loadgroup --durations=25
# The real MCP servers, Inspector and Claude Code the suite drives, exactly as each
# package-lock.json holds them (again whenever a lock changes).
NPM_STAMPS := $(patsubst %/package-lock.json,%/node_modules/.installed,$(wildcard \
  clients/typescript/package-lock.json tests/gateway/package-lock.json \
  tests/hooks/package-lock.json tests/oidc/package-lock.json \
  tests/conformance/package-lock.json tests/agents/package-lock.json))
%/node_modules/.installed: %/package-lock.json
	npm ci --prefix $* --no-audit --no-fund
	touch $@

test: $(STAMP) $(NPM_STAMPS)
	$(PYTEST) -m "not slow" $(XDIST) tests clients/python/tests
	$(PYTEST) -m slow --durations=25 tests || [ $$? -eq 5 ]

test-fast: $(STAMP)
	$(PYTEST) -m "not slow" $(XDIST) tests clients/python/tests

# The TypeScript client alone (clients/typescript): install its locked devDependencies,
# build, and run its node tests; the live ones skip without a service (`make test` runs them
# against one, tests/client/test_typescript.py).
test-ts:
	npm ci --prefix clients/typescript --no-audit --no-fund
	npm test --prefix clients/typescript

# Only the install step (what `run` and `test` do first), and the command's link.
install: link

lint: $(STAMP)
	$(BIN)/ruff check app tests migrations clients/python bench
	$(BIN)/hadolint Dockerfile
	$(BIN)/lint-imports

# After changing dependencies in a pyproject: resolve again and write uv.lock.
lock: | $(UV)
	$(UV) lock --python $(PYTHON)

# The benchmarks also need the `bench` group (cedarpy, py-spy), locked like the rest.
bench: $(STAMP)
	$(UV) sync --locked --extra dev --group bench --python $(PYTHON)
	$(BIN)/python bench/run.py
	$(BIN)/python bench/gateway.py  # the MCP gateway's added latency (docs/gateway.md)
	$(BIN)/python bench/hooks.py
	$(BIN)/python bench/rules.py  # what call rules cost a decision (docs/rules.md)

# The service image (docs/deployment.md); BASE=... builds on another base image.
image:
	docker build $(if $(BASE),--build-arg BASE=$(BASE)) -t toolgate .

clean:
	rm -rf $(VENV) .uv toolgate.db toolgate.db-wal toolgate.db-shm
