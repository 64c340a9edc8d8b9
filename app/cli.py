"""The `toolgate` command."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from app.config import Settings

cli = typer.Typer(help="toolgate: policy decisions for AI agents.", no_args_is_help=True,
                  add_completion=False)


def _settings() -> Settings:
    return Settings()


@cli.command()
def migrate() -> None:
    """Bring the database schema to head (TOOLGATE_DATABASE_URL, default ./toolgate.db)."""
    from app.store import migrate as migrations

    settings = _settings()
    migrations.upgrade(settings.database_url)
    typer.echo(f"schema at {migrations.head(settings.database_url)}")


@cli.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address [TOOLGATE_HOST]")] = None,
    port: Annotated[int | None, typer.Option(help="Port [TOOLGATE_PORT]")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes [TOOLGATE_WORKERS]")] = None,
) -> None:
    """Serve the API. On the SQLite default the schema is migrated first; on PostgreSQL the
    schema must already be at head (run `toolgate migrate`)."""
    import uvicorn

    from app.store import migrate as migrations

    settings = _settings()
    if settings.is_sqlite:
        migrations.upgrade(settings.database_url)
    else:
        try:
            current = migrations.current(settings.database_url)
        except Exception as exc:  # unreachable database: say so plainly, do not start
            typer.echo(f"toolgate: cannot reach the database: {exc}", err=True)
            raise typer.Exit(2) from None
        expected = migrations.head(settings.database_url)
        if current != expected:
            typer.echo(
                f"toolgate: database schema is at {current or 'nothing'}, expected {expected}; "
                "run `toolgate migrate` first", err=True,
            )
            raise typer.Exit(2)
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=host or settings.host,
        port=port or settings.port,
        workers=workers or settings.workers,
        log_level=settings.log_level,
        proxy_headers=False,
    )


def main() -> None:
    cli(prog_name="toolgate")


if __name__ == "__main__":
    sys.exit(main())
