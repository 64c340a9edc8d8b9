"""The pins table (SPEC §19): one row per upstream server and tool the gateway has seen."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from app.store.base import Base, Json, UTCDateTime


class GatewayPin(Base):
    """What a tool is pinned to, and the other definition last seen, if any.

    `digest` None: seen (under `pin: approve`) but never pinned. `seen_*` set: a gateway
    saw a definition other than the pinned one (or an unpinned one); it is cleared when a
    gateway sees the pinned one again or an admin pins it."""

    __tablename__ = "gateway_pins"

    server: Mapped[str] = mapped_column(String(200), primary_key=True)
    tool: Mapped[str] = mapped_column(String(200), primary_key=True)
    digest: Mapped[str | None] = mapped_column(String(64))
    definition: Mapped[dict | None] = mapped_column(Json)
    # "first_use" (pinned by the first gateway that saw it) or the admin key's id.
    pinned_by: Mapped[str | None] = mapped_column(String(200))
    seen_digest: Mapped[str | None] = mapped_column(String(64))
    seen_definition: Mapped[dict | None] = mapped_column(Json)
    seen_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
