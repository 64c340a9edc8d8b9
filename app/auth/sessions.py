"""The page's sessions for people signed in with OIDC (SPEC §21), and the sign-ins under way.

Both are rows of `person_sessions` (app/auth/tables.py), found by the sha256 of the cookie's
secret (the secret itself is never stored), so every worker of `toolgate serve --workers N`
and every replica knows a session whichever one created it. A looked-up session is kept in
the process's memory for `ttl` seconds (TOOLGATE_KEY_CACHE_TTL_SECONDS, like API keys): a
page's requests cost a dict lookup, and a sign-out on another replica is honoured within
that bound (at once on the replica that signed out). A session lives a fixed time from its
sign-in; nothing extends it. Expired rows are deleted whenever a sign-in begins.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth.keys import Principal
from app.auth.roles import Role
from app.auth.tables import PersonSession
from app.store.engine import WRITE_OPTION

LOGIN, SESSION = "login", "session"
# Sign-ins under way are written before anyone is known: at most this many live at once
# (each lives 10 minutes), so a client looping on /ui/login cannot grow the table unbounded.
MAX_LOGINS = 10_000


class TooManyLogins(Exception):
    pass


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A person's session: the Principal every route sees, and what the page shows."""

    principal: Principal
    sub: str
    email: str | None
    name: str | None
    csrf: str
    expires_at: datetime

    def data(self) -> dict[str, Any]:
        p = self.principal
        return {"key_id": p.key_id, "role": p.role.value, "projects": p.project_list(),
                "principal": p.principal_name, "sub": self.sub, "email": self.email,
                "name": self.name, "csrf": self.csrf}

    @classmethod
    def from_row(cls, data: dict[str, Any], expires_at: datetime) -> SignedIn:
        projects = data.get("projects")
        principal = Principal(
            key_id=data["key_id"], role=Role(data["role"]),
            projects=None if projects is None else frozenset(projects),
            expires_at=expires_at, stateless=False, principal_name=data["principal"])
        return cls(principal=principal, sub=data["sub"], email=data.get("email"),
                   name=data.get("name"), csrf=data["csrf"], expires_at=expires_at)


class SessionStore:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], *, ttl: float,
                 capacity: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.sessions = sessions
        self.ttl = ttl
        self.capacity = capacity
        self._clock = clock
        self._cache: dict[str, tuple[SignedIn, float]] = {}

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[AsyncSession]:
        """A write transaction; on SQLite it takes the write lock at its start (BEGIN
        IMMEDIATE, app/store/engine.py), so it never fails upgrading a read lock."""
        async with self.sessions() as session, session.begin():
            await session.connection(execution_options={WRITE_OPTION: True})
            yield session

    async def _add(self, kind: str, data: dict[str, Any], lifetime: float) -> tuple[str, datetime]:
        secret = secrets.token_urlsafe(32)
        now = datetime.now(UTC)
        expires_at = now + timedelta(seconds=lifetime)
        async with self._writing() as session:
            session.add(PersonSession(token_hash=_hash(secret), kind=kind, data=data,
                                      created_at=now, expires_at=expires_at))
        return secret, expires_at

    async def _take(self, secret: str, kind: str) -> tuple[dict[str, Any], datetime] | None:
        """The row's data, deleting it (a sign-in under way is used once)."""
        key = _hash(secret)
        async with self._writing() as session:
            row = await session.get(PersonSession, key)
            if row is None or row.kind != kind:
                return None
            data, expires_at = dict(row.data), row.expires_at
            await session.delete(row)
        return (data, expires_at) if expires_at > datetime.now(UTC) else None

    # --- sign-ins under way -------------------------------------------------------------

    async def begin_login(self, data: dict[str, Any], lifetime: float = 600) -> str:
        async with self._writing() as session:
            await session.execute(delete(PersonSession)
                                  .where(PersonSession.expires_at <= datetime.now(UTC)))
            live = (await session.execute(
                select(func.count()).select_from(PersonSession)
                .where(PersonSession.kind == LOGIN))).scalar_one()
        if live >= MAX_LOGINS:
            raise TooManyLogins(f"{live} sign-ins are under way")
        secret, _ = await self._add(LOGIN, data, lifetime)
        return secret

    async def take_login(self, secret: str) -> dict[str, Any] | None:
        found = await self._take(secret, LOGIN)
        return None if found is None else found[0]

    # --- sessions -----------------------------------------------------------------------

    async def create(self, signed_in: SignedIn, lifetime: float) -> tuple[str, SignedIn]:
        """A new session (a new secret, whatever the person had before)."""
        secret, expires_at = await self._add(SESSION, signed_in.data(), lifetime)
        return secret, SignedIn.from_row(signed_in.data(), expires_at)

    def cached(self, secret: str) -> SignedIn | None:
        """The session from memory, or None when only the database can tell."""
        entry = self._cache.get(_hash(secret))
        if entry is None:
            return None
        signed_in, read_at = entry
        if self._clock() - read_at >= self.ttl:
            del self._cache[_hash(secret)]
            return None
        return signed_in

    async def find(self, secret: str) -> SignedIn | None:
        """The live session of a cookie's secret, or None (unknown, ended or expired)."""
        key = _hash(secret)
        signed_in = self.cached(secret)
        if signed_in is None:
            read_at = self._clock()
            async with self.sessions() as session:
                row = (await session.execute(
                    select(PersonSession).where(PersonSession.token_hash == key,
                                                PersonSession.kind == SESSION))).scalar()
            if row is None:
                return None
            signed_in = SignedIn.from_row(row.data, row.expires_at)
            if self.ttl > 0 and self.capacity > 0:
                if len(self._cache) >= self.capacity:
                    del self._cache[next(iter(self._cache))]
                self._cache[key] = (signed_in, read_at)
        if signed_in.expires_at <= datetime.now(UTC):
            self._cache.pop(key, None)
            return None
        return signed_in

    async def end(self, secret: str) -> None:
        key = _hash(secret)
        self._cache.pop(key, None)
        async with self._writing() as session:
            await session.execute(delete(PersonSession).where(PersonSession.token_hash == key))

