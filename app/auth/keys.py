"""API key secrets, the caller they stand for, and checking a presented key on the hot path.

A key is `tg_` + 32 random bytes (urlsafe base64). Only sha256(key) is stored. A fast hash
is the right one here: password hashes are slow to make guessing a *low-entropy* secret
expensive, but guessing 256 random bits is out of reach at any hash speed, and every
authorize call pays for the hash.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth import repository as repo
from app.auth.principals import normal
from app.auth.repository import CREATED
from app.auth.roles import Role
from app.edge.errors import Unauthorized
from app.kit.singleflight import SharedReads

log = logging.getLogger("toolgate.auth")

SECRET_PREFIX = "tg_"
DISPLAY_CHARS = 10  # "tg_" and 7 random characters: enough to tell keys apart
# The key id recorded for requests made with TOOLGATE_ADMIN_TOKEN (not a stored key).
ADMIN_TOKEN_ID = "admin-token"


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def new_key_id() -> str:
    return "key_" + secrets.token_hex(8)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def display_prefix(secret: str) -> str:
    return secret[:DISPLAY_CHARS]


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller a valid key stands for."""

    key_id: str
    role: Role
    projects: frozenset[str] | None  # None = every project
    expires_at: datetime | None = None
    # May send authorize requests without plan_id (SPEC §9): admin keys and keys created
    # with "stateless": true. Decided when the key is read, so the hot path's check is one
    # attribute test.
    stateless: bool = False
    # The person or service behind the key (the key's own id unless it was given one).
    principal_name: str = ""

    @property
    def scoped(self) -> bool:
        return self.projects is not None

    def sees(self, project: str | None) -> bool:
        """Whether a resource of `project` exists for this caller. A scoped key sees only
        its projects; a resource in no project belongs to none of them."""
        return self.projects is None or (project is not None and project in self.projects)

    def project_list(self) -> list[str] | None:
        """For query filters: None (no filter) or the sorted scope."""
        return None if self.projects is None else sorted(self.projects)

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


class KeyCache:
    """Validated keys by hash, each trusted for `ttl` seconds.

    `clear()` drops everything at once: the revoking process calls it when its transaction
    commits, and the LISTEN/NOTIFY listener when another process revoked. A lookup that was
    already reading the database when a clear happened does not store its (possibly
    pre-revocation) answer, or the revocation could hide behind it for a whole ttl.

    Once an entry is past half its ttl, `due()` says so (once): the Authenticator then
    re-reads the key in the background while requests go on using the entry, so under
    steady traffic an entry is renewed before it expires and no request waits for the
    database. The bound is unchanged: an entry is never used more than `ttl` seconds after
    the read that produced it began.

    Key hashes the database did not know (or knew as revoked) are remembered too, for the
    same ttl, so a client repeating a bogus or revoked key costs no database read each time
    (`missed`). A key created meanwhile must not be refused for long: its creation drops
    those entries (`forget_misses`: when the creating transaction commits, and on every
    other process by NOTIFY on PostgreSQL), and a read that began before it does not store
    its answer. Without NOTIFY a new key could be refused for at most `ttl` on another
    process, and only if its secret had been presented before it existed. Both kinds of
    entry are keyed by a fixed-size hash and bounded in number, so in bytes too.
    """

    def __init__(self, *, ttl: float, capacity: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.capacity = capacity
        self._clock = clock
        self._entries: dict[str, tuple[Principal, float]] = {}
        self._misses: dict[str, float] = {}  # key hash -> when the read that missed began
        self._renewing: set[str] = set()
        self.generation = 0

    def get(self, key_hash: str) -> Principal | None:
        entry = self._entries.get(key_hash)
        if entry is None:
            return None
        principal, stored_at = entry
        if self._clock() - stored_at >= self.ttl:
            del self._entries[key_hash]
            return None
        return principal

    def due(self, key_hash: str) -> bool:
        """True once per renewal for an entry past half its ttl (see the class doc)."""
        entry = self._entries.get(key_hash)
        if entry is None or key_hash in self._renewing \
                or self._clock() - entry[1] < self.ttl / 2:
            return False
        self._renewing.add(key_hash)
        return True

    def renewed(self, key_hash: str) -> None:
        self._renewing.discard(key_hash)

    def now(self) -> float:
        return self._clock()

    def put(self, key_hash: str, principal: Principal, *, generation: int,
            read_at: float | None = None) -> None:
        """Store what a read that began at `read_at` (default: now) found."""
        if generation != self.generation or self.ttl <= 0 or self.capacity <= 0:
            return
        if len(self._entries) >= self.capacity and key_hash not in self._entries:
            del self._entries[next(iter(self._entries))]
        self._entries[key_hash] = (principal, self._clock() if read_at is None else read_at)
        self._misses.pop(key_hash, None)

    def drop(self, key_hash: str) -> None:
        self._entries.pop(key_hash, None)

    def missed(self, key_hash: str) -> bool:
        """Whether a read that began less than `ttl` ago found no valid key for this hash."""
        read_at = self._misses.get(key_hash)
        if read_at is None:
            return False
        if self._clock() - read_at >= self.ttl:
            del self._misses[key_hash]
            return False
        return True

    def put_miss(self, key_hash: str, *, generation: int, read_at: float | None = None) -> None:
        """Remember that a read that began at `read_at` found no valid key for this hash."""
        if generation != self.generation or self.ttl <= 0 or self.capacity <= 0:
            return
        self._entries.pop(key_hash, None)
        if len(self._misses) >= self.capacity and key_hash not in self._misses:
            del self._misses[next(iter(self._misses))]
        self._misses[key_hash] = self._clock() if read_at is None else read_at

    def clear(self, _payload: Any = None) -> None:
        self.generation += 1
        self._entries.clear()
        self._misses.clear()

    def forget_misses(self, _payload: Any = None) -> None:
        """A key was created: forget the hashes found unknown (and let no read that began
        before store what it found)."""
        self.generation += 1
        self._misses.clear()

    def notified(self, payload: str | None) -> None:
        """A message on the keys channel (app/auth/repository.py): a key was created, or
        revoked, or (None) the listener may have missed messages."""
        if payload is not None and payload.startswith(CREATED):
            self.forget_misses()
        else:
            self.clear()

    def clear_on_commit(self, session: AsyncSession) -> None:
        """Clear once `session`'s transaction has committed (a lookup between the change and
        its commit would still read the key as valid)."""
        event.listen(session.sync_session, "after_commit", self.clear, once=True)

    def forget_misses_on_commit(self, session: AsyncSession) -> None:
        """forget_misses once `session`'s transaction (which creates a key) has committed."""
        event.listen(session.sync_session, "after_commit", self.forget_misses, once=True)

    def __len__(self) -> int:
        return len(self._entries)


INVALID = "invalid, revoked or expired API key"


class Authenticator:
    """Turns an `Authorization: Bearer` secret into a Principal, or raises Unauthorized."""

    def __init__(self, *, sessions: async_sessionmaker, cache: KeyCache,
                 admin_token: str | None) -> None:
        self.sessions = sessions
        self.cache = cache
        self._renewals: set[asyncio.Task] = set()  # referenced until done
        # Reads in flight, by (key hash, the cache generation they started in).
        self._reads: SharedReads[Principal] = SharedReads()
        self._admin_hash = hash_secret(admin_token) if admin_token else None

    async def authenticate(self, secret: str) -> Principal:
        key_hash = hash_secret(secret)
        principal = self.remembered(key_hash)
        return principal if principal is not None else await self.look_up(key_hash)

    async def look_up(self, key_hash: str) -> Principal:
        """The principal of a key hash from the database (cached for next time).

        Concurrent look-ups of one key share one read: when an agent's requests resume
        after a pause longer than the cache's ttl, 64 of them at once made 64 identical
        reads, a 50 ms stall (docs/performance.md). A look-up never joins a read that
        began before a revocation (a cache clear): it starts its own."""
        principal = await self._reads.get((key_hash, self.cache.generation),
                                           lambda: self._read(key_hash))
        return self._unexpired(principal)

    def remembered(self, key_hash: str) -> Principal | None:
        """The principal of a key hash from memory (the admin token, or a cached key, whose
        renewal this starts when due), or None when only the database can tell. Raises
        Unauthorized for an expired key. Synchronous: the hot path awaits nothing for a
        key it has seen within the cache's ttl."""
        if self._admin_hash is not None and hmac.compare_digest(key_hash, self._admin_hash):
            return ADMIN
        principal = self.cache.get(key_hash)
        if principal is None:
            if self.cache.missed(key_hash):  # read lately and found unknown or revoked
                raise Unauthorized(INVALID)
            return None
        if self.cache.due(key_hash):
            task = asyncio.get_running_loop().create_task(self._renew(key_hash))
            self._renewals.add(task)
            task.add_done_callback(self._renewals.discard)
        return self._unexpired(principal)

    @staticmethod
    def _unexpired(principal: Principal) -> Principal:
        if principal.expires_at is not None and principal.expired(datetime.now(UTC)):
            raise Unauthorized(INVALID)
        return principal

    async def _read(self, key_hash: str) -> Principal:
        generation, read_at = self.cache.generation, self.cache.now()
        async with self.sessions() as session:
            row = await repo.get_by_hash(session, key_hash)
        # Looking up by hash, never by the key, already keeps timing from telling
        # anything about a key; the final check is constant-time all the same.
        if row is None or not hmac.compare_digest(row.key_hash, key_hash) \
                or row.revoked_at is not None:
            self.cache.put_miss(key_hash, generation=generation, read_at=read_at)
            raise Unauthorized(INVALID)
        principal = Principal(
            key_id=row.id, role=Role(row.role),
            projects=frozenset(row.projects) if row.projects is not None else None,
            expires_at=row.expires_at,
            stateless=row.stateless or row.role == Role.ADMIN,
            principal_name=normal(row.principal or row.id),
        )
        self.cache.put(key_hash, principal, generation=generation, read_at=read_at)
        return principal

    async def _renew(self, key_hash: str) -> None:
        try:
            await self._read(key_hash)
        except Unauthorized:
            self.cache.drop(key_hash)  # revoked or gone: the next request reads, is refused
        except Exception as exc:  # the entry still expires at its ttl; requests then read
            log.warning("renewing a cached API key failed: %s", exc)
        finally:
            self.cache.renewed(key_hash)


ADMIN = Principal(key_id=ADMIN_TOKEN_ID, role=Role.ADMIN, projects=None, stateless=True,
                  principal_name=ADMIN_TOKEN_ID)
