"""The tool registry as the authorize hot path sees it: answered from memory.

`RegistryCache.get(name)` never touches the database. Freshness is kept by
`ensure_fresh(sessions)`, which the caller awaits before a decision:

- within `ttl` seconds of the last check it returns at once (no I/O, no lock); past half
  the ttl it also starts that check in the background, so under steady traffic the check
  is renewed before it expires and no decision waits for the database;
- otherwise it reads the one-row `registry_state.version` (bumped in the same transaction
  as every change to tools or project settings, on whichever replica made it) and
  reloads every tool and project's settings only when that number changed.

Staleness bound: a change committed by another process or replica sharing the database is
used by this process's decisions at most `ttl` seconds (setting `registry_ttl_seconds`,
default 1.0) plus one version read after its commit. A change made through this process
invalidates the cache when its transaction commits (`invalidate_on_commit`), so the next
decision here sees it. With `ttl=0` every decision reads the version (one indexed
single-row query) and no replica is ever stale.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.kit.singleflight import SharedReads
from app.policy.model import RegisteredTool
from app.policy.profiles import SafetyProfile
from app.policy.rules import EMPTY_RULESET, RuleSet
from app.profiles import service as profile_service
from app.registry import repository as registry_repo
from app.registry.tables import ProjectSettings, RegistryTool

log = logging.getLogger("toolgate.registry")


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    """A project's settings (SPEC §9) as decisions read them, from memory."""

    deny_unregistered_tools: bool = False
    approval_mode: str = "client_flag"  # "client_flag" | "server"
    shadow_profile: str | None = None


DEFAULT_PROJECT = ProjectConfig()


@dataclass(frozen=True, slots=True)
class Shadow:
    """A project's shadow profile (SPEC §12) as decisions read it: the latest version of
    the named profile, evaluated beside the plan's locked one and never enforced."""

    name: str
    version: int
    safety: SafetyProfile
    server_approvals: bool = False  # the project's approval_mode is "server"


def settings_facts(config: ProjectConfig) -> dict[str, Any] | None:
    """The project settings a decision depended on beyond its profile, as recorded in its
    detail for replay (SPEC §12); None when every one is at its default. One dict per
    project, shared by its records (never mutated)."""
    facts: dict[str, Any] = {}
    if config.deny_unregistered_tools:
        facts["deny_unregistered_tools"] = True
    if config.approval_mode != "client_flag":
        facts["approval_mode"] = config.approval_mode
    return facts or None


def project_config(row: ProjectSettings) -> ProjectConfig:
    return ProjectConfig(deny_unregistered_tools=row.deny_unregistered_tools,
                         approval_mode=row.approval_mode, shadow_profile=row.shadow_profile)


def registered_tool(row: RegistryTool) -> RegisteredTool:
    return RegisteredTool(
        name=row.name,
        writes=row.writes,
        checkpointable=row.checkpointable,
        unsafe=row.unsafe,
        read_only=row.read_only,
        destructive=row.safety_category == "destructive",
        skill_category=row.skill_category,
        path_args=tuple(row.path_args or ()),
        requires_approval=row.human_approval == "required",
        shell_arg=row.shell_arg,
        url_args=tuple(row.url_args or ()),
    )


async def _shadows(session: AsyncSession,
                   projects: dict[str, ProjectConfig]) -> dict[str, Shadow]:
    """Each shadowing project's profile, latest version. A profile change bumps the
    registry version when a project shadows it (app/profiles/routes.py), so this reload
    sees it."""
    wanted = {config.shadow_profile for config in projects.values() if config.shadow_profile}
    if not wanted:
        return {}
    found = {}
    for name in sorted(wanted):
        row = await profile_service.get_profile(session, name)
        if row is not None:
            found[name] = Shadow(row.name, row.version, SafetyProfile.model_validate(row.safety))
    return {project: replace(found[config.shadow_profile],
                             server_approvals=config.approval_mode == "server")
            for project, config in projects.items() if config.shadow_profile in found}


class RegistryCache:
    """Registered tools and each project's settings, refreshed by version."""

    def __init__(self, *, ttl: float = 1.0, clock: Callable[[], float] = time.monotonic,
                 rules: Callable[[AsyncSession], Awaitable[RuleSet]] | None = None) -> None:
        self.ttl = ttl
        self._clock = clock
        # Call rules (SPEC §18) travel with the registry's version: `rules` (the rules
        # feature's loader, wired by main.py) compiles them into one immutable RuleSet on
        # each reload; decisions read it from memory and test `.empty` first.
        self._load_rules = rules
        self.rules: RuleSet = EMPTY_RULESET
        self._tools: dict[str, RegisteredTool] = {}
        self._projects: dict[str, ProjectConfig] = {}
        self._deny_projects: frozenset[str] = frozenset()  # for the hot path's one lookup
        # Empty unless some project has a shadow_profile: the hot path tests it once.
        self.shadows: dict[str, Shadow] = {}
        # project -> settings_facts(), for the projects with any setting off its default.
        self.facts: dict[str, dict[str, Any]] = {}
        self._version: int | None = None  # None: never loaded
        self._checked_at: float | None = None  # None: check on the next ensure_fresh
        # Bumped by invalidate(); a reload that started before an invalidation must not
        # mark the cache fresh, or it could hide the change for a whole ttl.
        self._generation = 0
        self._reads: SharedReads[None] = SharedReads()
        self._renewal: asyncio.Task | None = None

    @property
    def version(self) -> int | None:
        """The registry version the memory reflects (None before the first load)."""
        return self._version

    def get(self, name: str) -> RegisteredTool | None:
        """The registry's word on a tool, from memory; call ensure_fresh first."""
        return self._tools.get(name)

    def requires_approval(self, name: str) -> bool:
        """Whether the tool's entry says "human_approval": "required" (SPEC §17)."""
        registered = self._tools.get(name)
        return registered is not None and registered.requires_approval

    def _age(self) -> float | None:
        return None if self._checked_at is None else self._clock() - self._checked_at

    async def ensure_fresh(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        """Cheap within ttl; otherwise one version read, and a full reload if it changed.

        Concurrent callers share one check: the others wait for it instead of piling
        identical queries on the database, and share its failure too: when the database
        does not answer, every caller gets the error once the one read gives up
        (TOOLGATE_DB_TIMEOUT_SECONDS), instead of each retrying in turn behind a lock, which
        held decisions for 35 s while Postgres was frozen (issue 22 item 4)."""
        if not self.fresh(sessions):
            await self._check(sessions, older_than=self.ttl)

    def fresh(self, sessions: async_sessionmaker[AsyncSession]) -> bool:
        """True when memory may answer without waiting (within ttl; past half of it, one
        renewal starts in the background); False when ensure_fresh must read first.
        Synchronous, for the hot path."""
        age = self._age()
        if age is None or age >= self.ttl:
            return False
        if age >= self.ttl / 2 and self._renewal is None:
            self._renewal = asyncio.get_running_loop().create_task(
                self._check(sessions, older_than=self.ttl / 2))
            self._renewal.add_done_callback(self._renewed)
        return True

    async def _check(self, sessions: async_sessionmaker[AsyncSession], *,
                     older_than: float) -> None:
        age = self._age()
        if age is not None and age < older_than:
            return
        # Keyed by the generation: a caller after an invalidation never joins a read that
        # began before it (that read may predate the change it was told about).
        await self._reads.get(self._generation, lambda: self._read(sessions))

    async def _read(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        generation, started = self._generation, self._clock()
        async with sessions() as session:
            version = await registry_repo.get_registry_version(session)
            if version != self._version:
                snapshot = await registry_repo.load_registry(session)
                # Reads of two generations may overlap: never go back to an older version.
                if self._version is None or snapshot.version >= self._version:
                    self._tools = {row.name: registered_tool(row) for row in snapshot.tools}
                    self._projects = {row.project: project_config(row)
                                      for row in snapshot.projects}
                    self._deny_projects = frozenset(
                        name for name, config in self._projects.items()
                        if config.deny_unregistered_tools)
                    self.facts = {name: facts for name, config in self._projects.items()
                                  if (facts := settings_facts(config)) is not None}
                    self.shadows = await _shadows(session, self._projects)
                    if self._load_rules is not None:
                        self.rules = await self._load_rules(session)
                    self._version = snapshot.version
        if generation == self._generation:
            self._checked_at = started  # the bound counts from the read, not its end

    def _renewed(self, task: asyncio.Task) -> None:
        self._renewal = None
        if not task.cancelled() and task.exception() is not None:
            # Decisions go on from memory until the ttl runs out; then they read themselves.
            log.warning("renewing the registry cache failed: %s", task.exception())

    def deny_unregistered(self, project: str | None) -> bool:
        """Whether `project` refuses tools missing from the registry, from memory; call
        ensure_fresh first (as for `get`)."""
        return project is not None and project in self._deny_projects

    def project(self, project: str | None) -> ProjectConfig:
        """A project's settings from memory (the defaults for a project without any, or for
        a request in no project); call ensure_fresh first (as for `get`)."""
        if project is None:
            return DEFAULT_PROJECT
        return self._projects.get(project, DEFAULT_PROJECT)

    def invalidate(self, _payload: Any = None) -> None:
        """Check the database on the next ensure_fresh, whatever the ttl (also the
        LISTEN/NOTIFY callback on Postgres)."""
        self._generation += 1
        self._checked_at = None

    def invalidate_on_commit(self, session: AsyncSession) -> None:
        """Invalidate once `session`'s transaction has committed (not before: a reload
        between the change and its commit would read the old version)."""
        event.listen(session.sync_session, "after_commit", self._after_commit, once=True)

    def _after_commit(self, _session: Any) -> None:
        self.invalidate()

    def __len__(self) -> int:
        return len(self._tools)


async def lock(session: AsyncSession) -> None:
    """Serialise this transaction with every registry writer (the registry lock): for
    features whose changes travel with the registry's version, as call rules do."""
    await registry_repo.lock_registry(session)


async def changed(session: AsyncSession, cache: RegistryCache) -> None:
    """Something decisions read through the registry cache changed in this transaction
    (call rules, SPEC §18): bump the version, so every replica reloads it, and this
    process's cache once the transaction commits."""
    await registry_repo.bump_registry_version(session)
    cache.invalidate_on_commit(session)


class ShadowProjects:
    """What a profile's change means for the registry (app/profiles/service.py `Shadows`):
    a project evaluates its decisions under its shadow profile too (SPEC §12), so a change
    of that profile makes every replica's registry cache reload, as a settings change
    does; and a profile some project shadows with cannot be deleted."""

    def __init__(self, registry: RegistryCache) -> None:
        self.registry = registry

    async def projects_shadowing(self, session: AsyncSession, profile: str) -> list[str]:
        return await registry_repo.projects_shadowing(session, profile)

    async def profile_changed(self, session: AsyncSession, profile: str) -> None:
        if await registry_repo.projects_shadowing(session, profile):
            await registry_repo.bump_registry_version(session)
            self.registry.invalidate_on_commit(session)
