"""In-process timings of the decision core (no server, no I/O), and of cedarpy evaluating
the same checks written as Cedar policies (bench/checks.cedar)."""

from __future__ import annotations

import inspect
import subprocess
import sys
import timeit
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from app.authorize.schemas import AuthorizeIn
from app.authorize.wire import decode_authorize, decode_authorize_json
from app.policy.checks import evaluate
from app.policy.model import Context, Tool
from app.policy.profiles import SafetyProfile
from bench.payload import ACTION_ID, BODY, PLAN_ID, SAFETY_PROFILE

CEDAR_POLICIES = Path(__file__).with_name("checks.cedar")
SUMMARY = {"provenance": "plan", "name": None, "version": None, "is_default": False}


def best_us(call: Callable[[], object], *, repeat: int = 5) -> float:
    """Best of `repeat` runs, each of at least 0.2 s so timer noise does not count."""
    timer = timeit.Timer(call)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e6


def decode(body: bytes) -> Any:
    """What the hot path does with a body: one msgspec pass (app/authorize/wire.py)."""
    request = decode_authorize_json(body)
    if request is None:
        raise RuntimeError("the benchmark body does not take the hot path's decoder")
    return request


def decode_two_pass(body: bytes) -> Any:
    """The hot path's other way, for bodies the one pass leaves: orjson, then msgspec."""
    return decode_authorize(orjson.loads(body))


def inputs() -> tuple[Tool, Context, SafetyProfile]:
    request = decode(BODY)
    return (request.core_tool(None),
            request.core_context(plan_id=PLAN_ID, stored_read_only=False),
            SafetyProfile.model_validate(SAFETY_PROFILE))


def decode_evaluate_encode(profile: SafetyProfile) -> bytes:
    request = decode(BODY)
    verdict = evaluate(request.core_tool(None),
                       request.core_context(plan_id=PLAN_ID, stored_read_only=False), profile)
    deny = verdict.deny
    return orjson.dumps({"decision_id": "00000000-0000-7000-8000-000000000000",
                         "allowed": verdict.allowed,
                         "deny": deny.as_dict() if deny is not None else None,
                         "plan_id": PLAN_ID, "profile": SUMMARY, "checks": None})


def _drive(coroutine: Any) -> Any:
    """Run a coroutine that never suspends (decide() on a cached plan) without a loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("decide() suspended: the plan was not answered from the cache")


def fresh_registry() -> Any:
    """A real RegistryCache, loaded once from a fresh migrated SQLite database (no tool
    registered) and never stale again: what decide() meets within its ttl."""
    import asyncio
    import tempfile

    from app.config import Settings
    from app.registry.service import RegistryCache
    from app.store import migrate
    from app.store.engine import make_engine, make_sessionmaker

    registry = RegistryCache(ttl=float("inf"))
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite+aiosqlite:///{folder}/registry.db"
        migrate.upgrade(url)

        async def load() -> None:
            engine = make_engine(Settings(database_url=url))
            try:
                await registry.ensure_fresh(make_sessionmaker(engine))
            finally:
                await engine.dispose()

        asyncio.run(load())
    return registry


def cached_decide(profile: SafetyProfile) -> Callable[[], tuple[dict, dict]]:
    """app.authorize.service.decide on a cached plan, called as the route calls it (body already
    decoded): registry lookup + core + decision id + response body + log record. Raises if
    decide() now needs an argument this harness does not know (its signature moved on)."""
    from app.authorize.service import decide
    from app.plans.service import PlanCache, PlanLock

    cache = PlanCache(16)
    cache.put(PlanLock(plan_id=PLAN_ID, action_id=ACTION_ID, project="bench",
                       read_only=False, safety=profile, summary=SUMMARY))
    kwargs: dict[str, Any] = {"sessions": None, "cache": cache,
                              "masked": frozenset({"password", "token", "secret"})}
    for name, parameter in inspect.signature(decide).parameters.items():
        if name == "registry":
            kwargs["registry"] = fresh_registry()
        elif (parameter.kind is parameter.KEYWORD_ONLY and name not in kwargs
                and parameter.default is parameter.empty):
            raise TypeError(f"decide() now needs `{name}`: update bench/core.py")
    request = decode(BODY)
    return lambda: _drive(decide(request, **kwargs))


def record_prepare(profile: SafetyProfile) -> Callable[[], object]:
    """The writer's CPU per record before its INSERT, as the Postgres writer does it:
    `chain_values` (canonical detail JSON, the chain hash, the row's tuple, its time as
    microseconds since 2000)."""
    from app.log.chain import GENESIS, chain_values
    from app.log.records import iso_from_ns, pg_micros

    response, record = cached_decide(profile)()
    assert response["allowed"], response
    record["created_at"] = iso_from_ns(record["created_at"])  # as Writer.commit does
    batch = [record]

    def prepare() -> object:
        return chain_values(batch, 0, GENESIS, time=pg_micros)

    return prepare


# --- cedarpy ---------------------------------------------------------------------------

def ensure_cedarpy() -> str | None:
    """None when cedarpy imports (installing it into this venv if needed), else why not.
    A benchmark-only dependency: pyproject.toml's `bench` group, which `make bench` installs."""
    try:
        import cedarpy  # noqa: F401
        return None
    except ImportError:
        pass
    print("cedarpy is not installed: `pip install cedarpy` into the venv ...", flush=True)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "cedarpy"],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return "pip install cedarpy failed: " + (done.stderr or done.stdout).strip()[-300:]
    try:
        import cedarpy  # noqa: F401
    except ImportError as exc:
        return f"cedarpy installed but does not import: {exc}"
    return None


def _decimal(value: float) -> dict:
    return {"__extn": {"fn": "decimal", "arg": f"{value:.4f}"}}


def cedar_resource(profile: SafetyProfile) -> list[dict]:
    attrs: dict[str, Any] = {
        "require_sandbox": profile.require_sandbox,
        "require_checkpoints": profile.require_checkpoints,
        "allow_unsafe_tools": profile.allow_unsafe_tools,
        "require_human_approval": profile.require_human_approval,
        "allowed_skill_categories": list(profile.allowed_skill_categories),
        "max_retries_per_step": profile.max_retries_per_step,
    }
    if profile.max_cost_per_plan is not None:
        attrs["max_cost_per_plan"] = _decimal(profile.max_cost_per_plan)
    if profile.max_total_cost is not None:
        attrs["max_total_cost"] = _decimal(profile.max_total_cost)
    return [{"uid": {"type": "Plan", "id": PLAN_ID}, "attrs": attrs, "parents": []}]


def cedar_request(tool: Tool, ctx: Context) -> dict:
    """The request with its context already serialised: the cheapest way to call cedarpy
    (a dict context is json.dumps'ed by cedarpy on every call)."""
    cedar_tool: dict[str, Any] = {"name": tool.name, "writes": tool.writes,
                                  "checkpointable": tool.checkpointable,
                                  "unsafe": tool.unsafe, "destructive": tool.destructive}
    if tool.skill_category is not None:
        cedar_tool["skill_category"] = tool.skill_category
    context = {
        "tool": cedar_tool,
        "plan_read_only": ctx.plan_read_only,
        "require_checkpoints": ctx.require_checkpoints,
        "sandbox_id": ctx.sandbox_id or "",
        "metadata": ctx.metadata,
        "accumulated_cost": _decimal(ctx.accumulated_cost),
        "total_accumulated_cost": _decimal(ctx.total_accumulated_cost),
        "step_retry_count": ctx.step_retry_count,
    }
    return {"principal": 'Agent::"coder-v2"', "action": 'Action::"authorize"',
            "resource": f'Plan::"{PLAN_ID}"', "context": orjson.dumps(context).decode()}


def cedar_agrees(tool: Tool, ctx: Context, profile: SafetyProfile) -> list[str]:
    """The Cedar policies must decide as toolgate does, on the benchmark input and on one
    denying variant per encoded check; returns the variants where they differ."""
    import cedarpy

    policies = cedarpy.PolicySet.from_str(CEDAR_POLICIES.read_text())
    variants = {
        "allow": (tool, ctx, profile),
        "read_only": (tool, replace(ctx, plan_read_only=True), profile),
        "checkpoint": (replace(tool, checkpointable=False), ctx, profile),
        "unsafe": (replace(tool, unsafe=True), ctx, profile),
        "skill_category": (replace(tool, skill_category="network"), ctx, profile),
        "skill_category_missing": (replace(tool, skill_category=None), ctx, profile),
        "sandbox": (tool, replace(ctx, sandbox_id=None), profile),
        "human_approval": (tool, ctx, profile.model_copy(
            update={"require_human_approval": True})),
        "human_approved": (tool, replace(ctx, metadata={**ctx.metadata,
                                                       "human_approved": True}),
                           profile.model_copy(update={"require_human_approval": True})),
        "cost": (tool, replace(ctx, accumulated_cost=25.0), profile),
        "total_cost": (tool, replace(ctx, total_accumulated_cost=300.0), profile),
        "retry": (tool, replace(ctx, step_retry_count=4), profile),
    }
    differ = []
    for name, (t, c, p) in variants.items():
        ours = evaluate(t, c, p).allowed
        entities = cedarpy.Entities.from_json_str(orjson.dumps(cedar_resource(p)).decode())
        theirs = cedarpy.is_authorized(cedar_request(t, c), policies, entities).allowed
        if ours != theirs:
            differ.append(f"{name}: toolgate {ours}, cedar {theirs}")
    return differ


def run(log: Callable[[str], None] = print) -> dict[str, Any]:
    tool, ctx, profile = inputs()
    assert evaluate(tool, ctx, profile).allowed, "the benchmark input must be allowed"
    results: dict[str, Any] = {"us": {}, "skipped": {}}
    us = results["us"]
    us["evaluate"] = best_us(lambda: evaluate(tool, ctx, profile))
    log(f"  evaluate (10 runtime checks)        {us['evaluate']:8.2f} µs")
    us["decode"] = best_us(lambda: decode(BODY))
    log(f"  decode (msgspec one pass, hot path) {us['decode']:8.2f} µs")
    us["decode_two_pass"] = best_us(lambda: decode_two_pass(BODY))
    log(f"  decode (orjson, then msgspec)       {us['decode_two_pass']:8.2f} µs")
    us["decode_pydantic"] = best_us(lambda: AuthorizeIn.model_validate_json(BODY))
    log(f"  decode (pydantic AuthorizeIn)       {us['decode_pydantic']:8.2f} µs")
    us["decode_evaluate_encode"] = best_us(lambda: decode_evaluate_encode(profile))
    log(f"  decode + evaluate + orjson encode   {us['decode_evaluate_encode']:8.2f} µs")
    try:
        us["decide"] = best_us(cached_decide(profile))
        log(f"  decide() (+ id, response, record)   {us['decide']:8.2f} µs")
        us["record_prepare"] = best_us(record_prepare(profile))
        log(f"  log record chained (writer, per row) {us['record_prepare']:8.2f} µs")
    except Exception as exc:  # the app is being edited; the other figures still stand
        results["skipped"]["decide"] = f"{type(exc).__name__}: {exc}"
        log(f"  decide(): skipped ({results['skipped']['decide']})")

    why_not = ensure_cedarpy()
    if why_not is not None:
        results["skipped"]["cedarpy"] = why_not
        log(f"  cedarpy: skipped ({why_not})")
        return results
    import cedarpy

    differ = cedar_agrees(tool, ctx, profile)
    results["cedar_disagrees"] = differ
    if differ:
        log(f"  WARNING: the Cedar policies decide differently: {differ}")
    policies = cedarpy.PolicySet.from_str(CEDAR_POLICIES.read_text())
    entities = cedarpy.Entities.from_json_str(orjson.dumps(cedar_resource(profile)).decode())
    request = cedar_request(tool, ctx)
    assert cedarpy.is_authorized(request, policies, entities).allowed
    us["cedarpy"] = best_us(lambda: cedarpy.is_authorized(request, policies, entities))
    results["cedarpy_version"] = getattr(cedarpy, "__version__", None) or _version("cedarpy")
    results["cedar_over_evaluate"] = us["cedarpy"] / us["evaluate"]
    log(f"  cedarpy is_authorized (same checks) {us['cedarpy']:8.2f} µs  "
        f"→ evaluate is {results['cedar_over_evaluate']:.0f}× faster")
    return results


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None
