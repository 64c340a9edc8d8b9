"""gateway.yaml (SPEC §14): read and validated like a policy file (app/policyfile): every
problem with its line, unknown keys refused, the whole file rejected at once. Pure: reading
the environment (the tokens) happens when the gateway starts (app/gateway/run.py)."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, ValidationError, model_validator

from app.kit.schemas import Cost, Name, Strict
from app.policyfile.document import _problem_for
from app.policyfile.yamlfile import PolicyFileError, Problem, read_yaml

__all__ = ["GatewayConfig", "PolicyFileError", "ServerConfig", "ToolEntry", "load_config"]

# No dot: the client sees SERVER.TOOL and the gateway splits on the first dot.
ServerName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
Seconds = Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)]
DEFAULT_DEADLINE_SECONDS = 60.0


class ToolgateConfig(Strict):
    url: Annotated[str, StringConstraints(pattern=r"^https?://[^\s]+$")]
    token_env: EnvName = "TOOLGATE_TOKEN"
    # One decision's round trip (the client retries 502/503/504 and transport errors
    # within it); past it the call fails closed.
    timeout_seconds: Seconds = 5.0


class OAuthListen(Strict):
    """The HTTP listener as an OAuth 2.1 resource server (SPEC §21, app/gateway/oauth.py):
    access tokens from `issuer` for `audience`, the gateway's resource URI (RFC 8707), which
    is the URL clients connect to (http(s)://host:port/path)."""

    issuer: Annotated[str, StringConstraints(pattern=r"^https?://[^\s]+$")]
    audience: Annotated[str, StringConstraints(pattern=r"^https?://[^\s]+$")]
    scopes: list[Annotated[str, StringConstraints(pattern=r"^[!#-\[\]-~]{1,100}$")]] = []


class HttpListen(Strict):
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8787
    path: Annotated[str, StringConstraints(pattern=r"^/[A-Za-z0-9._~/-]*$")] = "/mcp"
    token_env: EnvName | None = None
    oauth: OAuthListen | None = None

    @model_validator(mode="after")
    def _token_off_loopback(self) -> HttpListen:
        if self.token_env is not None and self.oauth is not None:
            raise ValueError("token_env or oauth, not both: one way to check a caller")
        if self.token_env is None and self.oauth is None and not is_loopback(self.host):
            raise ValueError(f"an HTTP listener on {self.host!r} (not loopback) needs "
                             "token_env or oauth: every request must carry a bearer token")
        return self


class Listen(Strict):
    stdio: bool | None = None
    http: HttpListen | None = None

    @model_validator(mode="after")
    def _one(self) -> Listen:
        if (self.stdio is True) == (self.http is not None):
            raise ValueError("exactly one listener: {stdio: true} or {http: {...}}")
        return self


class PlanConfig(Strict):
    action: Name | None = None
    plan_id: Name | None = None

    @model_validator(mode="after")
    def _one(self) -> PlanConfig:
        if (self.action is None) == (self.plan_id is None):
            raise ValueError("exactly one of action (a new plan at start) or plan_id")
        return self


class ApprovalsConfig(Strict):
    wait_seconds: Annotated[int, Field(ge=0, le=3600)] = 0


class Sandbox(Strict):
    id: Name | None = None
    root: Annotated[str, StringConstraints(min_length=1)] | None = None
    # The home directory the server's paths resolve `~` and $HOME against (SPEC §18): sent
    # as context.variables.HOME. Without it a deny rule's `~/...` pattern matches a path
    # that would match under any of the path's directories as home.
    home: Annotated[str, StringConstraints(min_length=1, pattern=r"^/")] | None = None


class ToolEntry(Strict):
    path_args: Annotated[list[Annotated[str, StringConstraints(min_length=1, max_length=200)]],
                         Field(max_length=32)] = []
    estimated_cost: Cost | None = None
    cost: Cost | None = None
    step_id: Name | None = None
    # With trust_annotations: annotations give writes and destructive; these two stay
    # false unless said here (SPEC §14).
    unsafe: bool | None = None
    checkpointable: bool | None = None


class ServerConfig(Strict):
    command: Annotated[list[Annotated[str, StringConstraints(min_length=1)]],
                       Field(min_length=1)] | None = None
    env: dict[EnvName, str] | None = None  # added to the gateway's environment (stdio)
    cwd: str | None = None
    url: Annotated[str, StringConstraints(pattern=r"^https?://[^\s]+$")] | None = None
    trust_annotations: bool = False
    # SPEC §19: first_use pins the first definition seen; approve waits for an admin.
    pin: Literal["first_use", "approve"] = "first_use"
    sandbox: Sandbox | None = None
    tools: dict[Annotated[str, StringConstraints(min_length=1, max_length=200)],
                ToolEntry] = {}
    deadline_seconds: Seconds | None = None

    @model_validator(mode="after")
    def _one(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("exactly one of command (a stdio upstream) or url "
                             "(Streamable HTTP)")
        if self.url is not None and (self.env is not None or self.cwd is not None):
            raise ValueError("env and cwd are for a command, not a url")
        return self


class GatewayConfig(Strict):
    version: Literal[1]
    toolgate: ToolgateConfig
    listen: Listen
    plan: PlanConfig
    approvals: ApprovalsConfig = ApprovalsConfig()
    deadline_seconds: Seconds = DEFAULT_DEADLINE_SECONDS
    servers: Annotated[dict[ServerName, ServerConfig], Field(min_length=1)]

    def deadline(self, server: str) -> float:
        return self.servers[server].deadline_seconds or self.deadline_seconds


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


SECTIONS = tuple(GatewayConfig.model_fields)


def load_config(text: str, source: str = "<gateway>") -> GatewayConfig:
    """The validated file, or PolicyFileError naming every problem with its line."""
    data, lines = read_yaml(text, source)
    if not isinstance(data, dict):
        raise PolicyFileError([Problem(1, "", "expected a mapping starting with `version: 1`")],
                              source)
    try:
        return GatewayConfig.model_validate(data)
    except ValidationError as exc:
        raise PolicyFileError([_problem_for(e, lines, SECTIONS) for e in exc.errors()],
                              source) from None
