"""`toolgate gateway -c FILE` and `toolgate gateway check -c FILE` (SPEC §14)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

gateway = typer.Typer(invoke_without_command=True, no_args_is_help=False,
                      help="An MCP gateway: every tool call through it is decided by toolgate "
                           "first (docs/gateway.md).")

ConfigOption = Annotated[Path | None, typer.Option(
    "-c", "--config", help="gateway.yaml", exists=False, dir_okay=False)]


def _load(path: Path | None):  # -> GatewayConfig
    from app.gateway.config import PolicyFileError, load_config

    if path is None:
        typer.echo("toolgate gateway: -c FILE is required", err=True)
        raise typer.Exit(2)
    try:
        text = path.read_text()
    except OSError as exc:
        typer.echo(f"toolgate gateway: cannot read {path}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None
    try:
        return load_config(text, str(path))
    except PolicyFileError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None


@gateway.callback()
def run(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Run the gateway (stdio or Streamable HTTP, as the file says) until stopped."""
    if ctx.invoked_subcommand is not None:
        return
    loaded = _load(config)
    try:
        from app.gateway.run import main
    except ImportError as exc:  # the `gateway` extra (mcp) or toolgate-client missing
        typer.echo(f"toolgate gateway: {exc.name} is not installed: pip install "
                   "'toolgate[gateway]' and clients/python", err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(main(loaded))


@gateway.command()
def check(config: ConfigOption = None) -> None:
    """Validate a gateway.yaml without starting anything."""
    loaded = _load(config)
    servers = ", ".join(loaded.servers)
    listener = "stdio" if loaded.listen.stdio else \
        f"http://{loaded.listen.http.host}:{loaded.listen.http.port}{loaded.listen.http.path}"
    typer.echo(f"{config}: ok ({listener}; servers: {servers})")


# -- toolgate gateway pins (SPEC §19 "Tool pinning", docs/gateway.md) ----------------------

pins = typer.Typer(help="Pins of the upstream tools' definitions, held by the service: list "
                        "them, accept a changed definition, forget a pin.",
                   no_args_is_help=True)
gateway.add_typer(pins, name="pins")

Url = Annotated[str, typer.Option(envvar="TOOLGATE_URL", help="Service URL")]
Token = Annotated[str | None, typer.Option(envvar="TOOLGATE_TOKEN",
                                           help="An API key (an admin's to change pins)")]
Server = Annotated[str, typer.Argument(help="The server's name in gateway.yaml")]
Tool = Annotated[str, typer.Argument(help="The tool's name on that server")]


def _pin_path(server: str, tool: str) -> str:
    from urllib.parse import quote

    return f"/v1/gateway/pins/{quote(server, safe='')}/{quote(tool, safe='')}"


def _line(pin: dict) -> str:
    digest = (pin.get("digest") or "-")[:12]
    seen = pin.get("seen") or {}
    shown = f"{pin['server']}.{pin['tool']}  {pin['status']}  pinned {digest}"
    if seen:
        shown += f"  seen {seen['digest'][:12]}"
    return shown


@pins.command("list")
def list_pins(server: Annotated[str | None, typer.Option(help="Only this server")] = None,
              url: Url = "http://127.0.0.1:8000", token: Token = None) -> None:
    """One line per pin: SERVER.TOOL, status (pinned, changed, pending), digests."""
    from app.cli.http import call

    answer = call("GET", url, "/v1/gateway/pins", token=token,
                  params={"server": server} if server else None)
    for pin in answer["items"]:
        typer.echo(_line(pin))
    if not answer["items"]:
        typer.echo("no pins")


@pins.command()
def accept(server: Server, tool: Tool,
           digest: Annotated[str | None, typer.Option(
               help="Pin this digest (default: the definition last seen)")] = None,
           url: Url = "http://127.0.0.1:8000", token: Token = None) -> None:
    """Pin the definition a gateway saw (status changed or pending): its calls pass again."""
    from app.cli.http import call, fail

    path = _pin_path(server, tool)
    if digest is None:
        seen = call("GET", url, path, token=token).get("seen")
        if not seen:
            raise fail(f"{server}.{tool}: no other definition was seen; nothing to accept")
        digest = seen["digest"]
    pin = call("PUT", url, path, token=token, json={"digest": digest})
    typer.echo(f"accepted: {_line(pin)}")


@pins.command()
def delete(server: Server, tool: Tool, url: Url = "http://127.0.0.1:8000",
           token: Token = None) -> None:
    """Forget the pin (under first_use the next definition seen is pinned)."""
    from app.cli.http import call

    call("DELETE", url, _pin_path(server, tool), token=token)
    typer.echo(f"deleted: {server}.{tool}")
