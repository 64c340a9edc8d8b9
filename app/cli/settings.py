"""The settings of a CLI command that opens the database itself (`serve`, `migrate`,
`audit prune`): read from the environment, or the command stops with every bad variable
named (exit 2), not a pydantic traceback."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from app.config import Settings

BAD_SETTING = 2


def settings_or_exit() -> Settings:
    from pydantic import ValidationError

    from app.config import Settings

    try:
        return Settings()
    except ValidationError as error:
        for problem in error.errors():
            field = "_".join(str(part) for part in problem["loc"]).upper()
            where = f"TOOLGATE_{field}" if field else "settings"
            typer.echo(f"toolgate: {where}: {problem['msg']}", err=True)
        raise typer.Exit(BAD_SETTING) from None
