"""Every table module, imported once so `metadata` is complete (Alembic env and tests)."""

from app.auth import tables as auth_tables  # noqa: F401
from app.decisions import tables as decision_tables  # noqa: F401
from app.store import (
    registry_tables,  # noqa: F401
    tables,  # noqa: F401
)
from app.store.tables import metadata

__all__ = ["metadata"]
