"""Settings from TOOLGATE_* environment variables. Nothing happens at import time."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./toolgate.db"

# A database URL's scheme -> the SQLAlchemy driver toolgate talks to it with. The plain
# schemes are what platforms and libpq hand out (postgres:// too); toolgate ships only the
# asyncio drivers, so any other driver would fail at the first connection.
DRIVERS = {
    "postgresql": "postgresql+asyncpg", "postgres": "postgresql+asyncpg",
    "postgresql+asyncpg": "postgresql+asyncpg",
    "sqlite": "sqlite+aiosqlite", "sqlite+aiosqlite": "sqlite+aiosqlite",
}


def _renamed_query(database_url: str, old: str, new: str) -> str:
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    if old not in url.query:
        return database_url
    query = {new if k == old else k: v for k, v in url.query.items()}
    return url.set(query=query).render_as_string(hide_password=False)


def asyncpg_dsn(database_url: str) -> str | None:
    """The libpq DSN that asyncpg.connect takes for a PostgreSQL database URL (the log
    writer's and the notifier's own connections); None for other databases. SQLAlchemy's
    asyncpg dialect takes TLS as `?ssl=MODE`, a DSN as libpq's `?sslmode=MODE`: in a DSN
    asyncpg would send `ssl` to the server as a setting, which refuses it."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    if url.get_backend_name() != "postgresql":
        return None
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    return _renamed_query(dsn, "ssl", "sslmode")


LogLevel = Literal["critical", "error", "warning", "info", "debug", "trace"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TOOLGATE_", extra="ignore")

    database_url: str = DEFAULT_DATABASE_URL
    # An admin key given by the environment (docs/auth.md "Bootstrap"); never stored.
    admin_token: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    workers: int = Field(default=1, ge=1, le=64)
    # uvicorn's levels (uvicorn.config.LOG_LEVELS), any case: checked here, so an unknown
    # one stops `toolgate serve` with the variable named instead of a KeyError in uvicorn.
    log_level: LogLevel = "info"
    # A plan's lock never changes, so it can be cached without invalidation; the bound only
    # caps memory (an entry is well under 1 KiB).
    plan_cache_size: int = Field(default=100_000, ge=0)
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    db_pool_size: int = Field(default=10, ge=1)
    # The longest any database call waits (a pooled connection, a new connection, a
    # statement with its lock waits; SQLite's busy timeout): past it the request gets 503
    # storage_unavailable instead of hanging on a database that does not answer.
    db_timeout_seconds: float = Field(default=5.0, gt=0, le=3600)
    # POST /v1/authorize-tool served as plain ASGI (app/authorize/hotpath.py); false routes
    # it through FastAPI like every other route (same answers, about 3x slower).
    fast_path: bool = True
    # The HTTP protocol `toolgate serve` runs: "toolgate" is toolgate's own (app/edge/
    # connection.py: the hot route answered in it, the edge's limits on every request);
    # "uvicorn" is uvicorn's own httptools protocol inside the edge's guard (app/edge/guard.py).
    http_protocol: Literal["toolgate", "uvicorn"] = "toolgate"
    # uvicorn's per-request access log. Off by default: every decision is in the decision
    # log already, and the access line costs more than the decision itself.
    access_log: bool = False
    # Operations (docs/operations.md). Log lines as text or one JSON object per line; both
    # carry the request's id (X-Request-ID) and the decision's where there is one.
    log_format: Literal["text", "json"] = "text"
    # GET /metrics: off only to measure what counting costs (bench/run.py --no-metrics).
    metrics_enabled: bool = True
    # When set, GET /metrics needs `Authorization: Bearer <this token>` (not an API key).
    metrics_token: str | None = None
    # The tool and project labels of the per-tool and per-project decision counters: the
    # first this many names each process sees, then "other" (label values stay bounded).
    metrics_max_tools: int = Field(default=50, ge=0, le=10_000)
    metrics_max_projects: int = Field(default=50, ge=0, le=10_000)

    # The HTTP edge (app/edge/limits.py, docs/deployment.md "Slow and oversized requests").
    # A request's target and header names and values, in bytes, and its number of headers:
    # past either, 431. The deadlines: a request's headers within header_timeout of its
    # first byte, its body within body_timeout of the end of its headers (else 408 and the
    # connection is closed); an idle connection is closed after keep_alive. At most
    # max_connections connections per worker (lowered to what the open-file limit allows):
    # past it the connection that waited longest on its client is closed, or the new one
    # answered 503. Answered before its body was read (a 413), a request's body is still
    # read and dropped, up to drain_max_bytes and for drain_seconds at most, so the client
    # reads the answer rather than a connection reset.
    max_header_bytes: int = Field(default=16 * 1024, ge=1024)
    max_headers: int = Field(default=100, ge=8)
    header_timeout_seconds: float = Field(default=10.0, gt=0)
    body_timeout_seconds: float = Field(default=30.0, gt=0)
    keep_alive_seconds: float = Field(default=5.0, gt=0)
    max_connections: int = Field(default=2048, ge=16)
    drain_max_bytes: int = Field(default=4 * 1024 * 1024, ge=0)
    drain_seconds: float = Field(default=5.0, ge=0)
    # How stale the tool registry may be on a replica (app/registry/service.py states the bound).
    registry_ttl_seconds: float = Field(default=1.0, ge=0)

    # Authentication (docs/auth.md). A validated key is remembered this long in each
    # process; revocation reaches other processes at once through LISTEN/NOTIFY on
    # PostgreSQL, and within this bound otherwise.
    key_cache_ttl_seconds: float = Field(default=1.0, ge=0)
    # Whether non-admin keys may create plans with an inline safety_profile (admins always
    # may; docs/auth.md). Requests without plan_id are a key's property ("stateless": true).
    allow_inline_profiles: bool = False
    # Approvals held by the service (SPEC §10, docs/approvals.md), for projects with
    # approval_mode "server": how long a pending request waits for a person, and how many
    # may wait per plan (past that, a denied call creates none).
    approval_pending_ttl_seconds: int = Field(default=3600, ge=1, le=30 * 86400)
    approval_max_pending_per_plan: int = Field(default=20, ge=1, le=10_000)
    # ...and per project, over all its plans (else new plans multiply the per-plan cap).
    approval_max_pending_per_project: int = Field(default=200, ge=1, le=1_000_000)
    # The ledger (SPEC §11, docs/ledger.md): how long an allowed call's estimated_cost is
    # held before, unreported, it is charged as spent.
    cost_hold_seconds: int = Field(default=3600, ge=1, le=30 * 86400)
    # Webhooks (docs/approvals.md "Webhooks"): each attempt's timeout, and how many
    # attempts before a delivery is marked failed (backing off up to 5 minutes apart).
    webhook_timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    webhook_max_attempts: int = Field(default=30, ge=1, le=1000)
    # How often each process looks for new events, due deliveries and lapsed approvals.
    webhook_poll_seconds: float = Field(default=0.5, gt=0, le=60)
    # Hosts and networks (CIDRs; comma-separated in the env) a webhook may be sent to
    # although they are inside: loopback, private, link-local... (app/webhooks/guard.py).
    webhook_allow_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Delivered webhook rows are deleted this many days after delivery.
    webhook_delivery_retention_days: int = Field(default=30, ge=1, le=3650)
    # POST /v1/replay (docs/replay.md): the most stored decisions one replay re-evaluates;
    # past it the answer says `truncated` (stopping where it got to, never timing out).
    replay_max_records: int = Field(default=1_000_000, ge=1, le=100_000_000)

    # People sign in to the page with OpenID Connect (SPEC §21, docs/auth.md); unset, the
    # page takes an API key. The client secret directly or from a file (one wins: the file).
    # The roles claim's values map to a role and projects: a JSON object
    # {"<claim value>": {"role": "approver", "projects": ["p1"] or null}}, first match wins.
    oidc_issuer: str | None = None
    oidc_client_id: str | None = None
    oidc_client_secret: str | None = None
    oidc_client_secret_file: str | None = None
    oidc_roles_claim: str = "groups"
    oidc_role_map: Annotated[dict[str, dict], NoDecode] = Field(default_factory=dict)
    # ...and/or a policy file's `people:` section, read at start (its entries after these).
    oidc_people_file: str | None = None
    oidc_scopes: str = "openid email profile"
    # The page's callback as registered at the provider; unset: this server's /ui/callback
    # as the browser reached it.
    oidc_redirect_uri: str | None = None
    # A signed-in person's session lasts this long (no renewal: sign in again).
    oidc_session_seconds: int = Field(default=8 * 3600, ge=60, le=30 * 86400)

    # Requests per second per key, a token bucket in each process's memory (None = off);
    # the burst defaults to max(1, rate).
    rate_limit_per_second: float | None = Field(default=None, gt=0)
    rate_limit_burst: int | None = Field(default=None, ge=1)

    # Decision log. Disabling it breaks "no record, no allow"; it exists to measure what
    # durability costs (bench/), not for production.
    decision_log_enabled: bool = True
    # SQLite only. FULL: a committed decision survives a power loss (fsync per commit).
    # NORMAL (WAL): survives a crash or kill of toolgate, but the last commits may be lost
    # if the machine itself loses power.
    sqlite_synchronous: Literal["FULL", "NORMAL"] = "FULL"
    decision_log_max_batch: int = Field(default=512, ge=1, le=10_000)
    # Where the group commit runs. auto (and process): in a writer process, the worker's own
    # or, under `toolgate serve --workers N`, one shared by the workers. inline: with
    # Postgres and one worker, on the worker's own event loop (less CPU in all, all of it on
    # the worker's core: docs/performance.md says when that wins).
    decision_log_writer: Literal["auto", "process", "inline"] = "auto"
    # How many steps below its worker a worker's own writer process runs (os.nice; 0 keeps
    # the worker's priority). Not the shared writer of `--workers N`, which every worker
    # waits on. Why: docs/performance.md, "The writer a little below its worker".
    decision_log_writer_nice: int = Field(default=10, ge=0, le=19)
    decision_log_timeout_seconds: float = Field(default=5.0, gt=0)
    # Keys of context.metadata, context.variables and tool.args whose values are replaced
    # by "[masked]" before a record is stored (case-insensitive; comma-separated in the env).
    masked_keys: Annotated[list[str], NoDecode] = Field(default_factory=lambda: [
        "password", "secret", "token", "api_key", "apikey", "authorization", "cookie",
    ])

    # Signed checkpoints (SPEC §16, docs/checkpoints.md): the file of
    # an Ed25519 key (`toolgate keys signing-key new FILE`); unset, nothing is signed. The
    # log's writer signs its head every checkpoint_seconds in which the log grew.
    log_signing_key: str | None = None
    checkpoint_seconds: float = Field(default=10.0, gt=0, le=86400)

    @field_validator("log_signing_key")
    @classmethod
    def _signing_key(cls, value: str | None) -> str | None:
        # The file itself is read and checked by `toolgate serve` (app/cli/main.py
        # signing_key_problem): the settings import nothing of the log.
        return None if value is None or not value.strip() else value

    @field_validator("database_url")
    @classmethod
    def _driver(cls, value: str) -> str:
        scheme, sep, rest = value.strip().partition("://")  # a secret file's newline
        driver = DRIVERS.get(scheme.lower()) if sep else None
        if driver is None:
            raise ValueError("not a database URL toolgate can use: postgresql://user@host:"
                             "5432/db or sqlite:///path/to/file.db")
        url = f"{driver}://{rest}"
        return _renamed_query(url, "sslmode", "ssl") if driver == DRIVERS["postgres"] else url

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("oidc_role_map", mode="before")
    @classmethod
    def _role_map(cls, value: object) -> object:
        if isinstance(value, str):
            import json

            try:
                return json.loads(value) if value.strip() else {}
            except ValueError as exc:
                raise ValueError(f"not JSON: {exc}") from None
        return value

    @field_validator("oidc_issuer", "oidc_client_id", "oidc_client_secret",
                     "oidc_client_secret_file", "oidc_redirect_uri", "oidc_people_file")
    @classmethod
    def _blank(cls, value: str | None) -> str | None:
        return None if value is None or not value.strip() else value.strip()

    @field_validator("masked_keys", "webhook_allow_hosts", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @cached_property
    def masked(self) -> frozenset[str]:
        return frozenset(k.lower() for k in self.masked_keys)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")
