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
