"""The first admin key on the SQLite default (docs/auth.md "Bootstrap").

`toolgate serve` on SQLite, with no TOOLGATE_ADMIN_TOKEN and no usable admin key in the
database, creates one, prints it once and writes it beside the database
(`toolgate.db` -> `toolgate.admin-key`), readable only by its owner. It runs in the serve
command before any worker starts, so several workers never race to create keys. On
PostgreSQL nothing is created: set TOOLGATE_ADMIN_TOKEN and create keys with it.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from app.auth import repository as repo
from app.auth.keys import display_prefix, hash_secret, new_key_id, new_secret
from app.auth.tables import ApiKey
from app.config import Settings
from app.kit.caller import Caller
from app.log.audit import audit_change
from app.store.base import utcnow
from app.store.engine import make_engine, make_sessionmaker


@dataclass(frozen=True)
class Bootstrapped:
    key_id: str
    secret: str
    path: Path


def key_file_path(database_url: str) -> Path | None:
    """`<database without its suffix>.admin-key`; None for anything but a SQLite file."""
    url = make_url(database_url)
    database = url.database
    if url.get_backend_name() != "sqlite" or not database or database == ":memory:" \
            or database.startswith("file:"):
        return None
    return Path(database).with_suffix(".admin-key")


def write_secret(path: Path, secret: str) -> None:
    """Create the file with mode 0600 from the start (never world-readable, even briefly)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)  # the umask can only have removed bits; make it exact
        os.write(fd, (secret + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def bootstrap_admin_key(settings: Settings) -> Bootstrapped | None:
    if settings.admin_token or not settings.is_sqlite:
        return None
    path = key_file_path(settings.database_url)
    if path is None:
        return None
    return asyncio.run(_create(settings, path))


async def _create(settings: Settings, path: Path) -> Bootstrapped | None:
    engine = make_engine(settings)
    try:
        async with make_sessionmaker(engine)() as session, session.begin():
            if await repo.count_usable_admins(session, utcnow()):
                return None
            secret = new_secret()
            row = ApiKey(id=new_key_id(), name="bootstrap", role="admin", projects=None,
                         key_hash=hash_secret(secret), prefix=display_prefix(secret),
                         created_at=utcnow(), created_by=None)
            await repo.insert(session, row)
            await audit_change(session, Caller(), resource="key", name=row.id,
                               operation="bootstrap", before=None,
                               after={"name": row.name, "role": row.role, "projects": None,
                                      "prefix": row.prefix, "expires_at": None,
                                      "revoked": False, "stateless": False,
                                      "principal": row.id})
            # Written before the commit: if the file cannot be written, no key exists that
            # nobody can read.
            write_secret(path, secret)
        return Bootstrapped(row.id, secret, path.resolve())
    finally:
        await engine.dispose()
