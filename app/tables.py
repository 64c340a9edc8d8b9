"""Every feature's tables, imported once so `metadata` is complete (Alembic's env and the
tests). The store itself imports no feature: this module is wiring, like main.py."""

from app.approvals import tables as approval_tables  # noqa: F401
from app.auth import tables as auth_tables  # noqa: F401
from app.ledger import tables as ledger_tables  # noqa: F401
from app.log import tables as decision_tables  # noqa: F401
from app.pins import tables as pin_tables  # noqa: F401
from app.plans import tables as plan_tables  # noqa: F401
from app.profiles import tables as profile_tables  # noqa: F401
from app.registry import tables as registry_tables  # noqa: F401
from app.rules import tables as rule_tables  # noqa: F401
from app.store import tables as store_tables  # noqa: F401
from app.store.base import metadata
from app.webhooks import tables as webhook_tables  # noqa: F401

__all__ = ["metadata"]
