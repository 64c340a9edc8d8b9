"""create_app(settings): routers, error handlers; the lifespan owns the engine and caches."""

from __future__ import annotations

import gc
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI

from app import __version__
from app.approvals.routes import router as approvals_router
from app.approvals.service import CHANNEL as APPROVALS_CHANNEL
from app.approvals.service import ApprovalService
from app.auth.deps import AuthState, authenticate_early, authorize
from app.auth.keys import Authenticator, KeyCache
from app.auth.oidc_login import People
from app.auth.ratelimit import RateLimiter
from app.auth.repository import KEYS_CHANNEL
from app.auth.routes import router as keys_router
from app.auth.sessions import SessionStore
from app.authorize.cases import router as test_router
from app.authorize.hotpath import FastAuthorize
from app.authorize.pipeline import Pipeline
from app.authorize.routes import batch_router
from app.authorize.routes import router as decide_router
from app.authorize.service import Authorizer
from app.background import Background
from app.config import Settings
from app.decisions import reader as log_reader
from app.decisions.checkpoint_routes import router as checkpoints_router
from app.decisions.routes import router as decisions_router
from app.edge import handlers, openapi
from app.edge.limits import HEAD_CHECKED, EdgeLimits, check_head
from app.edge.middleware import BodyLimit
from app.edge.observe import observed
from app.health.routes import router as health_router
from app.hooks.asgi import HookPath
from app.hooks.routes import router as hooks_router
from app.hooks.service import Hooks
from app.kit.notify import Notifier
from app.ledger.book import for_database as outcome_book
from app.ledger.reader import for_database as ledger_reader
from app.ledger.routes import router as ledger_router
from app.ledger.service import Ledger
from app.log.decision_log import DecisionLog
from app.log.writer.start import WRITER_SOCKET_ENV, checkpoint_config
from app.ops.routes import TOKEN_ERRORS
from app.ops.routes import router as ops_router
from app.ops.service import Metrics
from app.pins.routes import router as pins_router
from app.plans import repository as plan_repo
from app.plans.routes import router as plans_router
from app.plans.service import PlanCache
from app.policyfile.document import people_of_file
from app.profiles.routes import router as config_router
from app.profiles.service import ProfileService
from app.registry.repository import REGISTRY_CHANNEL
from app.registry.routes import router as registry_router
from app.registry.routes import safety_test_router
from app.registry.service import RegistryCache, ShadowProjects
from app.replay.routes import router as replay_router
from app.replay.service import Replayer
from app.rules.routes import router as rules_router
from app.rules.service import RuleBook
from app.store import migrate
from app.store.engine import make_engine, make_sessionmaker
from app.ui.reads import router as page_reads_router
from app.ui.routes import api_router as whoami_router
from app.ui.routes import router as ui_router
from app.ui.signin import router as signin_router
from app.webhooks.routes import router as webhooks_router

DESCRIPTION = """Policy decisions for AI agents: before every tool call an agent asks
"may this tool run, in this plan, with this context?" and toolgate answers allow, or deny
with a structured reason naming exactly one error class. See `GET /v1/errors`."""


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = make_engine(settings)
        sessions = make_sessionmaker(engine)
        decision_log = (
            DecisionLog(settings.database_url, max_batch=settings.decision_log_max_batch,
                        timeout=settings.decision_log_timeout_seconds,
                        sqlite_synchronous=settings.sqlite_synchronous,
                        socket=os.environ.get(WRITER_SOCKET_ENV),
                        writer=settings.decision_log_writer,
                        db_timeout=settings.db_timeout_seconds,
                        nice=settings.decision_log_writer_nice,
                        checkpoint=checkpoint_config(settings.log_signing_key,
                                                     settings.checkpoint_seconds))
            if settings.decision_log_enabled else None
        )
        if decision_log is not None:
            await decision_log.start()
        key_cache = KeyCache(ttl=settings.key_cache_ttl_seconds)
        notifier = Notifier(settings.database_url, timeout=settings.db_timeout_seconds)
        notifier.subscribe(KEYS_CHANNEL, key_cache.notified)
        rules = RuleBook()  # call rules (SPEC §18): compiled on each registry reload
        registry = RegistryCache(ttl=settings.registry_ttl_seconds, rules=rules.load)
        notifier.subscribe(REGISTRY_CHANNEL, registry.invalidate)
        plans = PlanCache(settings.plan_cache_size)
        auth = AuthState(
            authenticator=Authenticator(sessions=sessions, cache=key_cache,
                                        admin_token=settings.admin_token),
            key_cache=key_cache,
            rate_limiter=RateLimiter(rate=settings.rate_limit_per_second,
                                     burst=settings.rate_limit_burst)
            if settings.rate_limit_per_second else None,
            # People sign in to the page with OIDC (SPEC §21), when an issuer is set.
            people=People(settings, SessionStore(sessions, ttl=settings.key_cache_ttl_seconds),
                          people=people_of_file(settings.oidc_people_file)
                          if settings.oidc_people_file else None)
            if settings.oidc_issuer and settings.oidc_client_id else None,
        )
        approvals = ApprovalService(
            sessions, pending_ttl_seconds=settings.approval_pending_ttl_seconds,
            max_pending_per_plan=settings.approval_max_pending_per_plan,
            max_pending_per_project=settings.approval_max_pending_per_project,
            notified=notifier.enabled)
        notifier.subscribe(APPROVALS_CHANNEL, approvals.wake)
        ledger = Ledger(sessions, hold_seconds=settings.cost_hold_seconds,
                        reader=ledger_reader(settings.database_url,
                                             settings.db_timeout_seconds),
                        plan_of=plan_repo.get_plan,
                        book=outcome_book(settings.database_url, settings.db_timeout_seconds,
                                          settings.sqlite_synchronous))
        authorizer = Authorizer(sessions=sessions, plans=plans, registry=registry,
                                masked=settings.masked, approvals=approvals, ledger=ledger)
        await notifier.start()
        background = Background(settings, sessions, approvals=approvals, ledger=ledger)
        background.start()
        metrics = Metrics(max_tools=settings.metrics_max_tools,
                          max_projects=settings.metrics_max_projects,
                          decision_log=decision_log, approvals=approvals,
                          db_timeout=settings.db_timeout_seconds) \
            if settings.metrics_enabled else None
        if metrics is not None:
            metrics.start()
            if decision_log is not None:  # every recorded decision passes here
                decision_log.on_records = metrics.tally.records
        if isinstance(app, ToolgateApp):
            app.tally = metrics.tally if metrics is not None else None
        # Each feature's state under its own name; each feature's deps.py reads its own.
        state = app.state
        state.settings, state.engine, state.sessions = settings, engine, sessions
        state.schema_head = migrate.head(settings.database_url)
        state.known_revisions = migrate.known_revisions(settings.database_url)
        state.auth, state.plans, state.registry = auth, plans, registry
        state.rules = rules
        state.profiles = ProfileService(shadows=ShadowProjects(registry))
        state.authorizer, state.decision_log, state.notifier = authorizer, decision_log, notifier
        # The one decision entry point every transport of /v1/authorize-tool calls.
        state.pipeline = Pipeline(authorizer=authorizer, authenticator=auth.authenticator,
                                  rate_limiter=auth.rate_limiter, limit=settings.max_body_bytes)
        state.approvals, state.background = approvals, background
        state.ledger = ledger
        state.hooks = Hooks(pipeline=state.pipeline, decision_log=decision_log,
                            sessions=sessions, ledger=ledger,
                            allow_inline_profiles=settings.allow_inline_profiles)
        state.replayer = Replayer(sessions=sessions, plans=plans,
                                  max_records=settings.replay_max_records)
        state.metrics = metrics
        state.log_reader = log_reader.for_database(settings.database_url,
                                                   settings.db_timeout_seconds)
        if isinstance(app, ToolgateApp) and app.fast_path is not None:
            # The transport gets the decision log as its recorder, wired here.
            app.fast_path.attach(pipeline=state.pipeline, decision_log=decision_log,
                                 tally=app.tally, access_log=settings.access_log)
        if isinstance(app, ToolgateApp) and app.hook_path is not None:
            app.hook_path.attach(hooks=state.hooks, pipeline=state.pipeline)
        # Everything allocated so far lives as long as the process: keep it out of the
        # cyclic GC's full collections, which otherwise walk ~120k start-up objects
        # (~45 ms, a pause every in-flight request waits for) again and again.
        gc.freeze()
        try:
            yield
        finally:
            if metrics is not None:
                await metrics.close()
            await background.close()
            await ledger.close()
            if state.log_reader is not None:
                state.log_reader.close()
            await notifier.close()
            if decision_log is not None:
                await decision_log.close()
            await engine.dispose()

    app = ToolgateApp(title="toolgate", version=__version__, description=DESCRIPTION,
                      lifespan=lifespan, docs_url=None, redoc_url=None)
    app.access_log = settings.access_log
    app.edge = EdgeLimits.from_settings(settings)
    # JSON routes check the key before FastAPI reads the body (app/edge/routing.py).
    app.state.authenticate_early = authenticate_early
    handlers.install(app)
    openapi.install(app)
    app.include_router(health_router)
    # /metrics, /docs, /redoc (app/ops/routes.py): no key; /metrics takes a token if set.
    app.include_router(ops_router, responses=TOKEN_ERRORS if settings.metrics_token else None)
    app.include_router(signin_router)  # the page's OIDC sign-in (before /ui/{name})
    app.include_router(ui_router)  # the operators' page: its files need no key
    # Every other route needs a key, and the role its route has in app/auth/roles.py; the
    # OpenAPI document says so once for all of them (app/edge/openapi.py).
    keyed = openapi.errors(401, 403, 503, *([429] if settings.rate_limit_per_second else []))
    for router in (decide_router, batch_router, plans_router, config_router,
                   registry_router, safety_test_router, decisions_router,
                   test_router, keys_router, approvals_router, webhooks_router,
                   ledger_router, replay_router, whoami_router,
                   page_reads_router, hooks_router, checkpoints_router, rules_router,
                   pins_router):
        openapi.document_inputs(router)
        app.include_router(router, dependencies=[Depends(authorize)], responses=keyed)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    if settings.fast_path:
        app.fast_path = FastAuthorize(limit=settings.max_body_bytes)
        app.hook_path = HookPath(limit=settings.max_body_bytes)
    return app


class ToolgateApp(FastAPI):
    """FastAPI, except that the hot route (app/authorize/hotpath.py) is answered before the
    middleware stack, which costs more per request than the decision itself, and that a
    request head past the edge's limits is refused (431) before anything reads it. toolgate's
    HTTP protocol (app/edge/connection.py) reads `edge` for the rest of the edge's limits and
    `fast_path` for the hot route it answers itself."""

    fast_path: FastAuthorize | None = None
    hook_path: HookPath | None = None  # the coding-agent hooks' route, likewise (app/hooks)
    edge: EdgeLimits = EdgeLimits()
    # The metrics' tally (None: off) and whether each request gets an access line: every
    # answer but the hot route's (which does it itself) is observed here (app/edge/observe.py:
    # X-Request-ID, the count by route and status, the line).
    tally: Any = None
    access_log: bool = False

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        if HEAD_CHECKED not in scope:
            try:
                check_head(scope, self.edge)
            except Exception as exc:
                await observed(handlers.render(exc), scope, receive, send, tally=self.tally,
                               access_log=self.access_log)
                return
        fast = self.fast_path
        if fast is not None and fast.handles(scope):
            scope["app"] = self
            await fast(scope, receive, send)
            return
        hooks = self.hook_path
        if hooks is not None and hooks.handles(scope):
            scope["app"] = self
            await observed(hooks, scope, receive, send, tally=self.tally,
                           access_log=self.access_log)
            return
        await observed(super().__call__, scope, receive, send, tally=self.tally,
                       access_log=self.access_log)
