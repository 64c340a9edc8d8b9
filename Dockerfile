# toolgate service image: `docker build -t toolgate .` (or `make image`); docs/deployment.md.
# BASE: a Debian-based image with Python 3.11+ (python3 on the PATH) and apt. The default is
# the official image, pinned by version tag; `--build-arg BASE=...` builds on another one
# (an offline build on a local base: docs/deployment.md).
ARG BASE=python:3.11.13-slim-bookworm

# --- build: the locked dependencies and the service in /opt/toolgate ----------------------
FROM ${BASE} AS build
ARG UV_VERSION=0.13.9
# UV_NATIVE_TLS: uv trusts the base image's certificate store, as pip does.
ENV UV_PROJECT_ENVIRONMENT=/opt/toolgate UV_PYTHON_DOWNLOADS=never UV_NATIVE_TLS=1 \
    UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_NO_CACHE=1
WORKDIR /srv/toolgate
RUN python3 -m venv /opt/uv && /opt/uv/bin/pip install --no-cache-dir uv==${UV_VERSION}
# The dependencies first, exactly as uv.lock holds them (--locked: a lock that does not
# match pyproject.toml fails the build): this layer changes only with the lock.
COPY pyproject.toml uv.lock README.md ./
COPY clients/python/pyproject.toml clients/python/README.md clients/python/
RUN /opt/uv/bin/uv sync --locked --no-dev --no-install-project --python python3
# Then the service, installed in place: `toolgate migrate` finds migrations/ beside app/.
COPY alembic.ini ./
COPY migrations ./migrations
COPY app ./app
RUN /opt/uv/bin/uv sync --locked --no-dev --python python3

# --- the image: no uv, no build files --------------------------------------------------------
FROM ${BASE}
# tini is PID 1: it forwards SIGTERM to `toolgate serve` (which drains its workers and the
# decision log writer, docs/deployment.md) and reaps orphaned processes.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini=0.19.0-1+b3 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 toolgate \
    && useradd --system --uid 10001 --gid 10001 --no-create-home toolgate \
    && mkdir -p /data && chown 10001:10001 /data
COPY --from=build /opt/toolgate /opt/toolgate
COPY --from=build /srv/toolgate /srv/toolgate
WORKDIR /srv/toolgate
# The SQLite default lives on the /data volume (its first admin key too, written to
# /data/toolgate.admin-key and never printed into the logs); set TOOLGATE_DATABASE_URL for
# PostgreSQL. Change the port with TOOLGATE_PORT: the health check follows it.
ENV PATH=/opt/toolgate/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    TOOLGATE_HOST=0.0.0.0 TOOLGATE_PORT=8000 \
    TOOLGATE_DATABASE_URL=sqlite+aiosqlite:////data/toolgate.db
# Numeric, so a runtime can tell it is not root without reading /etc/passwd.
USER 10001:10001
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s CMD ["python3", "-c", "import os, sys, urllib.request; port = os.environ.get('TOOLGATE_PORT') or '8000'; sys.exit(urllib.request.urlopen(f'http://127.0.0.1:{port}/readyz', timeout=2).status != 200)"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["toolgate", "serve"]
