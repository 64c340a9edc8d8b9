"""The settings of a CLI command that opens the database itself (`serve`, `migrate`,
`audit prune`): read from the environment, or the command stops with every bad variable
named (exit 2), not a pydantic traceback."""

from __future__ import annotations

from pathlib import Path
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


def sqlite_file(settings: Settings) -> Path | None:
    """The file of a SQLite TOOLGATE_DATABASE_URL (None: another database, or in memory)."""
    if not settings.is_sqlite:
        return None
    from sqlalchemy.engine import make_url

    database = make_url(settings.database_url).database
    return Path(database) if database and database != ":memory:" else None


def sqlite_folder_or_exit(settings: Settings) -> None:
    """Stops (exit 2) naming the folder when a SQLite database's folder does not exist:
    SQLite's own word for it is "unable to open database file", which names nothing."""
    path = sqlite_file(settings)
    if path is not None and not path.parent.is_dir():
        typer.echo(f"toolgate: TOOLGATE_DATABASE_URL: the folder {path.parent} of the SQLite "
                   f"database {path.name} does not exist; create it, or name another",
                   err=True)
        raise typer.Exit(BAD_SETTING)
