"""The role matrix as data: which roles hold each permission, and which permission each
route needs. The auth dependency (app/auth/deps.py), the docs table (docs/auth.md) and the
route-coverage test all read these two tables; change access here and nowhere else."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    ADMIN = "admin"
    AGENT = "agent"
    APPROVER = "approver"
    AUDITOR = "auditor"


ALL_ROLES = frozenset(Role)


@dataclass(frozen=True)
class Rule:
    roles: frozenset[Role]
    # Needs a key whose project scope is "all" (projects = null): the answer spans projects.
    unscoped_only: bool = False
    note: str = ""


def _roles(*roles: Role) -> frozenset[Role]:
    return frozenset({Role.ADMIN, *roles})


PERMISSIONS: dict[str, Rule] = {
    "errors.read": Rule(ALL_ROLES, note="any valid key"),
    "profiles.read": Rule(_roles(Role.AGENT, Role.AUDITOR), note="profiles are global"),
    "profiles.write": Rule(_roles()),
    "config.read": Rule(_roles(Role.AGENT, Role.AUDITOR), note="the global config"),
    "config.write": Rule(_roles(), note="global config, projects, actions, call rules"),
    "rules.read": Rule(_roles(Role.AGENT, Role.APPROVER, Role.AUDITOR),
                       note="global rules, and project rules within the key's projects "
                            "(others 404)"),
    "projects.read": Rule(_roles(Role.AGENT, Role.APPROVER, Role.AUDITOR),
                          note="within the key's projects, else 404"),
    "actions.read": Rule(_roles(Role.AGENT, Role.APPROVER, Role.AUDITOR),
                         note="within the key's projects, else 404"),
    "plans.create": Rule(_roles(Role.AGENT),
                         note="the action must be in the key's projects, else 404"),
    "plans.read": Rule(_roles(Role.AGENT, Role.APPROVER),
                       note="within the key's projects (lists filtered, others 404)"),
    "plans.transition": Rule(_roles(Role.AGENT), note="within the key's projects, else 404"),
    "resolve": Rule(_roles(Role.AGENT),
                    note="a plan, action or project outside the key's projects is 404"),
    "authorize": Rule(_roles(Role.AGENT),
                      note="a plan outside the key's projects is 404; requests without "
                           "plan_id need an admin key or a stateless one (else 403)"),
    "decisions.test": Rule(_roles(Role.AGENT), unscoped_only=True,
                           note="cases may name any plan: a scoped key gets 403; a case "
                                "without plan_id follows the stateless rule (authorize)"),
    "screen": Rule(_roles(Role.AGENT)),
    "safety_test": Rule(_roles(Role.AGENT)),
    "registry.read": Rule(ALL_ROLES, note="tools and skills are global; registry settings "
                                          "within the key's projects, else 404"),
    "registry.write": Rule(_roles()),
    "settings.read": Rule(_roles(Role.AGENT, Role.APPROVER, Role.AUDITOR),
                          note="within the key's projects, else 404 (the list: filtered)"),
    "settings.write": Rule(_roles(), note="project settings (SPEC §9)"),
    "decisions.read": Rule(_roles(Role.AUDITOR),
                           note="decisions and stats, filtered to the key's projects"),
    "audit.export": Rule(_roles(Role.AUDITOR), note="filtered to the key's projects"),
    "audit.verify": Rule(_roles(Role.AUDITOR), unscoped_only=True,
                         note="the whole chain: a scoped key gets 403"),
    "audit.checkpoints": Rule(_roles(Role.AUDITOR),
                              note="signed checkpoints of the whole chain's head (SPEC §16)"),
    "keys.manage": Rule(_roles()),
    "approvals.read": Rule(_roles(Role.AGENT, Role.APPROVER, Role.AUDITOR),
                           note="within the key's projects (lists filtered, others 404)"),
    "approvals.decide": Rule(_roles(Role.APPROVER),
                             note="within the key's projects, else 404; never an approval "
                                  "requested by a key of the same principal (403)"),
    "webhooks.manage": Rule(_roles(), note="webhooks and their deliveries (SPEC §10)"),
    "outcomes.report": Rule(_roles(Role.AGENT),
                            note="the key that made the decision (or an admin), else 403; "
                                 "within the key's projects, else 404"),
    "ledger.read": Rule(_roles(Role.AGENT, Role.APPROVER, Role.AUDITOR),
                        note="within the key's projects, else 404"),
    "ledger.credit": Rule(_roles(), note="lowers spent, audited (SPEC §11)"),
    "replay": Rule(_roles(Role.AUDITOR),
                   note="decisions of the key's projects only (SPEC §12); changes nothing"),
    "whoami": Rule(ALL_ROLES, note="the key's own role, projects and permissions "
                                   "(the operators' page reads it)"),
    "pins.read": Rule(_roles(Role.AGENT, Role.APPROVER, Role.AUDITOR),
                      note="the gateway's tool pins (SPEC §19): global"),
    "pins.write": Rule(_roles(), note="pin, accept or forget a tool definition, audited"),
    "pins.report": Rule(_roles(Role.AGENT),
                        note="a gateway reports the definition it sees; under first_use the "
                             "first one is pinned; a refused call is recorded"),
    "principals.read": Rule(_roles(Role.APPROVER, Role.AUDITOR),
                            note="the name, principal and role behind key ids "
                                 "(the operators' page shows who asked and who decided)"),
}

# Routes that never need a key.
PUBLIC: frozenset[tuple[str, str]] = frozenset({
    ("GET", "/healthz"), ("GET", "/readyz"), ("HEAD", "/healthz"), ("HEAD", "/readyz"),
    ("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/docs/oauth2-redirect"),
    ("GET", "/redoc"),
    # Operations (docs/operations.md): the docs' own files; /metrics is open unless
    # TOOLGATE_METRICS_TOKEN is set, and then needs that token, never an API key.
    ("GET", "/docs/assets/{name}"), ("GET", "/metrics"),
    # The operators' page's files (app/ui/): the page signs in with a key of its own.
    ("GET", "/ui"), ("GET", "/ui/checks.json"), ("GET", "/ui/{name}"),
    # Signing in with the organisation's provider (SPEC §21, app/ui/signin.py): before
    # anyone is known; the session cookie and its CSRF token guard what follows.
    ("GET", "/ui/login"), ("GET", "/ui/callback"), ("GET", "/ui/signin.json"),
    ("POST", "/ui/logout"),
})

# (method, path template) -> permission. A route missing here answers 403 to every key but
# an admin's, and tests/kit/test_route_coverage.py fails until it is added.
ROUTES: dict[tuple[str, str], str] = {
    ("GET", "/v1/errors"): "errors.read",
    ("GET", "/v1/profiles"): "profiles.read",
    ("GET", "/v1/profiles/{name}"): "profiles.read",
    ("GET", "/v1/profiles/{name}/versions"): "profiles.read",
    ("PUT", "/v1/profiles/{name}"): "profiles.write",
    ("DELETE", "/v1/profiles/{name}"): "profiles.write",
    ("GET", "/v1/config"): "config.read",
    ("PUT", "/v1/config"): "config.write",
    ("GET", "/v1/projects"): "projects.read",
    ("GET", "/v1/projects/{project}"): "projects.read",
    ("PUT", "/v1/projects/{project}"): "config.write",
    ("GET", "/v1/actions"): "actions.read",
    ("GET", "/v1/actions/{action_id}"): "actions.read",
    ("PUT", "/v1/actions/{action_id}"): "config.write",
    ("GET", "/v1/rules"): "rules.read",
    ("GET", "/v1/rules/{rule_id}"): "rules.read",
    ("PUT", "/v1/rules/{rule_id}"): "config.write",
    ("DELETE", "/v1/rules/{rule_id}"): "config.write",
    ("POST", "/v1/plans"): "plans.create",
    ("GET", "/v1/plans"): "plans.read",
    ("GET", "/v1/plans/{plan_id}"): "plans.read",
    ("POST", "/v1/plans/{plan_id}/execute"): "plans.transition",
    ("POST", "/v1/plans/{plan_id}/lifecycle-apply"): "plans.transition",
    ("POST", "/v1/resolve"): "resolve",
    ("POST", "/v1/authorize-tool"): "authorize",
    ("POST", "/v1/authorize-tools"): "authorize",
    # Coding-agent hooks (SPEC §15): decisions, plan use per session and outcomes.
    ("POST", "/v1/hooks/claude-code"): "authorize",
    ("POST", "/v1/test"): "decisions.test",
    ("POST", "/v1/screen"): "screen",
    ("POST", "/v1/skills/{name}/safety-test"): "safety_test",
    ("GET", "/v1/tools"): "registry.read",
    ("GET", "/v1/tools/{name}"): "registry.read",
    ("PUT", "/v1/tools/{name}"): "registry.write",
    ("DELETE", "/v1/tools/{name}"): "registry.write",
    ("GET", "/v1/skills"): "registry.read",
    ("GET", "/v1/skills/{name}"): "registry.read",
    ("PUT", "/v1/skills/{name}"): "registry.write",
    ("DELETE", "/v1/skills/{name}"): "registry.write",
    ("GET", "/v1/projects/{project}/registry-settings"): "registry.read",
    ("PUT", "/v1/projects/{project}/registry-settings"): "registry.write",
    ("GET", "/v1/projects/{project}/settings"): "settings.read",
    ("PUT", "/v1/projects/{project}/settings"): "settings.write",
    ("GET", "/v1/project-settings"): "settings.read",
    ("GET", "/v1/decisions"): "decisions.read",
    ("GET", "/v1/decisions/stats"): "decisions.read",
    ("GET", "/v1/decisions/{decision_id}"): "decisions.read",
    ("GET", "/v1/audit/export"): "audit.export",
    ("GET", "/v1/audit/verify"): "audit.verify",
    ("GET", "/v1/audit/checkpoint"): "audit.checkpoints",
    ("GET", "/v1/audit/checkpoints"): "audit.checkpoints",
    ("GET", "/v1/audit/public-key"): "audit.checkpoints",
    ("POST", "/v1/keys"): "keys.manage",
    ("GET", "/v1/keys"): "keys.manage",
    ("DELETE", "/v1/keys/{key_id}"): "keys.manage",
    ("GET", "/v1/approvals"): "approvals.read",
    ("GET", "/v1/approvals/{approval_id}"): "approvals.read",
    ("POST", "/v1/approvals/{approval_id}/grant"): "approvals.decide",
    ("POST", "/v1/approvals/{approval_id}/reject"): "approvals.decide",
    ("POST", "/v1/approvals/{approval_id}/cancel"): "approvals.decide",
    ("GET", "/v1/webhooks"): "webhooks.manage",
    ("GET", "/v1/webhooks/{name}"): "webhooks.manage",
    ("PUT", "/v1/webhooks/{name}"): "webhooks.manage",
    ("DELETE", "/v1/webhooks/{name}"): "webhooks.manage",
    ("GET", "/v1/webhooks/{name}/deliveries"): "webhooks.manage",
    ("POST", "/v1/decisions/{decision_id}/outcome"): "outcomes.report",
    ("POST", "/v1/outcomes"): "outcomes.report",
    ("GET", "/v1/projects/{project}/ledger"): "ledger.read",
    ("POST", "/v1/plans/{plan_id}/ledger/credit"): "ledger.credit",
    ("POST", "/v1/projects/{project}/ledger/credit"): "ledger.credit",
    ("POST", "/v1/replay"): "replay",
    ("GET", "/v1/whoami"): "whoami",
    # The operators' page's reads (app/ui/reads.py, docs/ui.md).
    ("GET", "/v1/principals"): "principals.read",
    ("GET", "/v1/approvals/{approval_id}/decision"): "approvals.read",
    ("GET", "/v1/plans/{plan_id}/creator"): "plans.read",
    ("GET", "/v1/approval-stats"): "approvals.read",
    ("GET", "/v1/outcomes"): "decisions.read",
    # The gateway's tool pins (app/pins, SPEC §19).
    ("GET", "/v1/gateway/pins"): "pins.read",
    ("GET", "/v1/gateway/pins/{server}/{tool}"): "pins.read",
    ("PUT", "/v1/gateway/pins/{server}/{tool}"): "pins.write",
    ("DELETE", "/v1/gateway/pins/{server}/{tool}"): "pins.write",
    ("POST", "/v1/gateway/pins/{server}/{tool}/seen"): "pins.report",
}

# Unmapped routes: admins only (fail closed, still behind a key).
FALLBACK = Rule(frozenset({Role.ADMIN}))


def rule_for(method: str, path: str) -> tuple[str | None, Rule]:
    permission = ROUTES.get((method, path))
    if permission is None:
        return None, FALLBACK
    return permission, PERMISSIONS[permission]


def matrix_markdown() -> str:
    """The table in docs/auth.md (a test keeps the two identical)."""
    order = list(Role)
    lines = ["| permission | routes | " + " | ".join(r.value for r in order) + " | notes |",
             "|---|---|" + "---|" * len(order) + "---|"]
    for permission, rule in PERMISSIONS.items():
        routes = "<br>".join(f"`{m} {p}`" for (m, p), perm in ROUTES.items()
                             if perm == permission)
        marks = " | ".join("yes" if role in rule.roles else "" for role in order)
        lines.append(f"| {permission} | {routes} | {marks} | {rule.note} |")
    return "\n".join(lines) + "\n"
