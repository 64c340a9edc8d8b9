"""Settings from TOOLGATE_* environment variables. Nothing happens at import time."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./toolgate.db"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TOOLGATE_", extra="ignore")

    database_url: str = DEFAULT_DATABASE_URL
    admin_token: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = Field(default=1, ge=1, le=64)
    log_level: str = "info"
    # A plan's lock never changes, so it can be cached without invalidation; the bound only
    # caps memory (an entry is well under 1 KiB).
    plan_cache_size: int = Field(default=100_000, ge=0)
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    db_pool_size: int = Field(default=10, ge=1)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")
