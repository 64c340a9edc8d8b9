"""Subcommands loaded when they are used: `toolgate --version` or `toolgate approvals list`
imports only what that command needs, not every command's dependencies (the policy-file
parser, pydantic models, the service's settings). `toolgate --help` loads them all, to list
their help lines."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

if TYPE_CHECKING:  # typer carries its own click (typer._click): no second import of it
    import click

# Markdown: a docstring's single line breaks do not break a help line mid-sentence.
MARKUP = "markdown"


def _flags_take_no_value() -> None:
    """typer 0.29's help shows a flag's type as a value to give (`--dry-run <bool>`); a flag
    takes none, so its type column is left empty, as click's own help does. (A method of
    typer's public TyperOption, replaced once here: uv.lock pins typer.)"""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_take_no_value()

# name -> "module:attribute", in the order `--help` lists them after the eager commands.
# The attribute is a typer.Typer (a group of commands) or a function (one command).
LAZY_COMMANDS: dict[str, str] = {
    "apply": "app.cli.apply:apply",
    "export": "app.cli.apply:export",
    "replay": "app.cli.replay:replay",
    "audit": "app.cli.audit:audit",
    "keys": "app.cli.keys:keys",
    "approvals": "app.cli.approvals:approvals",
    "gateway": "app.cli.gateway:gateway",
    "hook": "app.cli.hook:hook",
    "rules": "app.cli.rules:rules",
}


def _load(name: str, target: str) -> click.Command:
    module, _, attribute = target.partition(":")
    obj: Any = getattr(importlib.import_module(module), attribute)
    if isinstance(obj, typer.Typer):
        obj.rich_markup_mode = MARKUP  # one paragraph reads as one, as in the root's help
        command = typer.main.get_group(obj)
    else:
        # No --install-completion of its own: completion is the root's (`toolgate
        # --install-completion`), as for the eager commands.
        single = typer.Typer(rich_markup_mode=MARKUP, add_completion=False)
        single.command(name)(obj)
        command = typer.main.get_command(single)
    command.name = name
    return command


class LazyGroup(TyperGroup):
    """The root group: eager commands as Typer registers them, the others from
    LAZY_COMMANDS on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        eager = super().list_commands(ctx)
        return eager + [name for name in LAZY_COMMANDS if name not in eager]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in LAZY_COMMANDS:
            command = _load(cmd_name, LAZY_COMMANDS[cmd_name])
            self.add_command(command, cmd_name)
        return command
