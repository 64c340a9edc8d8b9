# toolgate service image. Build: docker build -t toolgate .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    TOOLGATE_HOST=0.0.0.0 TOOLGATE_PORT=8000
WORKDIR /srv/toolgate

COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY migrations ./migrations
# Editable, so `toolgate migrate` finds migrations/ beside app/.
RUN pip install --no-cache-dir -e . \
    && useradd --system --uid 10001 toolgate \
    && mkdir -p /data && chown toolgate /data
USER toolgate
# The SQLite default lives on a volume; set TOOLGATE_DATABASE_URL for PostgreSQL.
ENV TOOLGATE_DATABASE_URL=sqlite+aiosqlite:////data/toolgate.db
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/readyz').status != 200)"
CMD ["toolgate", "serve"]
