"""API keys. Only a hash of each secret is stored; the secret is shown once, at creation."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Boolean, String, false
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.store.base import Base, Json, UTCDateTime

# SQL NULL (not JSON null) for "every project", so the column reads the way it means.
NullableJson = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(16))
    # None = every project; a list = only these.
    projects: Mapped[list[str] | None] = mapped_column(NullableJson)
    # sha256 hex of the whole secret: what a presented key is looked up by.
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # The first characters of the secret, for people to tell keys apart; not secret.
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    created_by: Mapped[str | None] = mapped_column(String(64))
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_by: Mapped[str | None] = mapped_column(String(64))
    # May send authorize requests without plan_id (SPEC §9; admin keys always may).
    stateless: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # The person or service behind the key; None means the key's own id.
    principal: Mapped[str | None] = mapped_column(String(200))


class PersonSession(Base):
    """A person signed in to the page with OIDC (app/auth/sessions.py), or one on the way
    (kind "login": the state, nonce and PKCE verifier between /ui/login and /ui/callback).
    Kept in the database so that every worker and replica knows it."""

    __tablename__ = "person_sessions"

    # sha256 hex of the cookie's secret: what a presented cookie is looked up by.
    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(8))  # "login" | "session"
    data: Mapped[dict] = mapped_column(Json)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
