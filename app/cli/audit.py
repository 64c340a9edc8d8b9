"""`toolgate audit export|verify|prune`."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Annotated

import typer

from app.cli.http import DEFAULT_URL, fail
from app.cli.progress import Progress

audit = typer.Typer(help="Export, verify and prune the decision log.", no_args_is_help=True)

Url = Annotated[str, typer.Option(envvar="TOOLGATE_URL", help="Service URL")]
Token = Annotated[str | None, typer.Option(envvar="TOOLGATE_TOKEN", help="API key")]


def _moment(value: str | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise fail(f"--{name}: not an RFC 3339 date or time: {value!r}") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


@audit.command("export")
def export(
    since: Annotated[str | None, typer.Option(help="RFC 3339 start (inclusive)")] = None,
    until: Annotated[str | None, typer.Option(help="RFC 3339 end (exclusive)")] = None,
    format: Annotated[str, typer.Option(help="jsonl or csv")] = "jsonl",
    output: Annotated[str | None, typer.Option("--output", "-o", help="File (default stdout)")]
    = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Stream the decision log from a running service to a file, in constant memory."""
    import httpx

    params = {k: v for k, v in {"since": since, "until": until, "format": format}.items() if v}
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    sink = open(output, "wb") if output else sys.stdout.buffer  # noqa: SIM115
    try:
        with httpx.stream("GET", url.rstrip("/") + "/v1/audit/export", params=params,
                          headers=headers, timeout=None) as response:
            if not response.is_success:
                response.read()
                raise fail(f"export failed: HTTP {response.status_code} {response.text[:300]}")
            progress = Progress(header_lines=1 if format == "csv" else 0)
            for chunk in response.iter_bytes():
                sink.write(chunk)
                progress(chunk)
            progress.done()
    except httpx.HTTPError as exc:
        raise fail(f"cannot reach {url}: {exc}") from None
    finally:
        if output:
            sink.close()


@audit.command("verify")
def verify(
    file: Annotated[str | None, typer.Option("--file", help="A JSONL export to check offline")]
    = None,
    head: Annotated[str | None, typer.Option(help="Expected hash of the newest record (kept "
                                             "elsewhere), to detect truncation")] = None,
    partial: Annotated[bool, typer.Option(
        "--partial", help="The file is a part of the log (an export of a time range): accept "
        "it starting anywhere, its first record's seq and prev_hash trusted")] = False,
    since: Annotated[str | None, typer.Option(help="RFC 3339 start (online only)")] = None,
    until: Annotated[str | None, typer.Option(help="RFC 3339 end (online only)")] = None,
    checkpoint: Annotated[str | None, typer.Option(
        "--checkpoint", help="A signed checkpoint (its note, or GET /v1/audit/checkpoint's "
        "answer, in a file): the export must hold its (seq, head_hash); with --file")] = None,
    public_key: Annotated[list[str] | None, typer.Option(
        "--public-key", help="The verifier key the checkpoint must be signed by "
        "(`<origin>+<id>+<key>`, or a file holding it); repeat for rotated keys")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the result as JSON (ok, checked, first_bad, head, range)")]
        = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Check the hash chain: offline on an export file (--file), else on the service.
    Prints what was proved (first and last record, count, anchor), or the first record
    that breaks the chain and why; --json prints the same as JSON. Exit 0 when
    intact, 1 when a record was altered, removed or reordered, or the file is empty or
    starts neither at the chain's first record nor at a prune anchor (unless --partial)."""
    import orjson

    from app.cli.http import call
    from app.log.chain import Verifier

    against = _against(checkpoint, public_key or [], file)
    if file is None:
        if partial:
            raise fail("--partial goes with --file (the service checks a range anchored on "
                       "its stored records)")
        params = {k: v for k, v in {"since": since, "until": until}.items() if v}
        result = call("GET", url, "/v1/audit/verify", token=token, params=params)
    else:
        verifier = Verifier(partial=partial)
        try:
            with open(file, "rb") as handle:
                for number, line in enumerate(handle, start=1):
                    if not line.strip():
                        continue
                    try:
                        record = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        record = None
                    if not isinstance(record, dict) and line.startswith(b"seq,decision_id,"):
                        raise fail(f"{file} is CSV (an export with --format csv, its header "
                                   "row first): the chain is verified on the JSONL export, "
                                   "`toolgate audit export -o FILE.jsonl`")
                    if not isinstance(record, dict):
                        verifier.first_bad = {"seq": None, "decision_id": None, "line": number,
                                              "reason": f"line {number} is not a JSON record"}
                        break
                    if against is not None:
                        against.feed(record)
                    if not verifier.feed(record):
                        verifier.first_bad["line"] = number
                        break
        except OSError as exc:
            raise fail(f"cannot read {file}: {exc.strerror}") from None
        result = verifier.result().as_dict()
        if result["ok"] and head is not None and result["head"] != head:
            result["ok"] = False
            result["first_bad"] = {"seq": None, "decision_id": None,
                                   "reason": "the last record's hash is not the expected head "
                                             "(records missing at the end)"}
        if result["ok"] and against is not None and (why := against.result()) is not None:
            result["ok"] = False
            result["first_bad"] = {"seq": None, "decision_id": None,
                                   "reason": f"against the checkpoint: {why}"}
        if against is not None:
            point = next(iter(against.want.values()))
            result["checkpoint"] = {"seq": point.seq, "head_hash": point.head_hash,
                                    "time": point.time, "origin": point.origin,
                                    "holds": result["ok"]}
    if as_json:
        typer.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    else:
        typer.echo(summary(result))
    if not result["ok"]:
        raise typer.Exit(1)


def summary(result: dict) -> str:
    """`audit verify`'s answer for a person: what was proved, or where the chain breaks."""
    proved = result.get("range")
    lines = []
    if result["ok"]:
        lines.append(f"OK: {result['checked']} records intact")
    else:
        bad = result.get("first_bad") or {}
        where = f" at seq {bad['seq']}" if bad.get("seq") is not None else ""
        if bad.get("decision_id"):
            where += f" (decision {bad['decision_id']})"
        if bad.get("line") is not None:
            where += f", line {bad['line']}"
        lines.append(f"BROKEN{where}: {bad.get('reason', 'the chain does not verify')}")
        lines.append(f"{result.get('checked', 0)} records checked before it")
    if proved:
        lines.append(f"range: seq {proved['first_seq']} ({proved['first_decision_id']}) to seq "
                     f"{proved['last_seq']} ({proved['last_decision_id']}), {proved['count']} "
                     f"records, anchored at {proved['anchor']}")
    if result.get("head"):
        lines.append(f"head: {result['head']}")
    point = result.get("checkpoint")
    if point:
        lines.append(f"checkpoint: seq {point['seq']} of {point['origin']} at {point['time']}: "
                     + ("holds" if point["holds"] else "does NOT hold"))
    return "\n".join(lines)


def _key_text(value: str) -> str:
    import os

    if os.path.isfile(value):
        with open(value, encoding="utf-8") as handle:
            return handle.read().strip()
    return value


def _verifiers(keys: list[str]) -> list:
    from app.log.note import NoteError, Verifier

    try:
        return [Verifier.parse(_key_text(key)) for key in keys]
    except (NoteError, OSError) as exc:
        raise fail(f"--public-key: {exc}") from None


def _against(checkpoint: str | None, keys: list[str], file: str | None):  # noqa: ANN202
    """The check of an export against a signed checkpoint (--checkpoint), or None."""
    if checkpoint is None:
        if keys:
            raise fail("--public-key goes with --checkpoint")
        return None
    if file is None or not keys:
        raise fail("--checkpoint needs --file (an export) and --public-key")
    import orjson

    from app.log.checkpoints import Against, open_checkpoint
    from app.log.note import NoteError

    try:
        with open(checkpoint, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise fail(f"cannot read {checkpoint}: {exc.strerror}") from None
    if raw.lstrip().startswith(b"{"):  # GET /v1/audit/checkpoint's answer, saved
        try:
            raw = orjson.loads(raw)["note"].encode()
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            raise fail(f"{checkpoint}: JSON without a \"note\"") from None
    try:
        return Against([open_checkpoint(raw, _verifiers(keys))])
    except NoteError as exc:
        typer.echo(f"toolgate: the checkpoint does not verify: {exc}", err=True)
        raise typer.Exit(1) from None


@audit.command("witness")
def witness(
    public_key: Annotated[list[str], typer.Option(
        "--public-key", help="The log's verifier key (`<origin>+<id>+<key>`, or a file "
        "holding it); repeat for rotated keys")],
    store: Annotated[str, typer.Option(help="Folder keeping the checkpoints (one file "
                                       "each), where the database's admin cannot write")],
    every: Annotated[float, typer.Option(min=0.1, help="Seconds between rounds")] = 10.0,
    once: Annotated[bool, typer.Option("--once", help="One round, then exit (cron): 0 "
                                       "when the log extends what is stored")] = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Fetch the log's new signed checkpoints, check each signature and that each
    extends the last one stored (the export between them verifies), and store them. On a
    fork (a rewritten history, a seq with two hashes, a seq going back) log one line
    naming both checkpoints and exit 1; 2 when --once could not reach the service. Needs
    an auditor key for every project (TOOLGATE_TOKEN)."""
    import logging

    from app.cli.witness import run

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    verifiers = _verifiers(public_key)
    raise typer.Exit(run(url, token, verifiers, store, every, once))


@audit.command("prune")
def prune(
    before: Annotated[str, typer.Option(help="Remove records created before this RFC 3339 "
                                        "date or time")],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation")] = False,
) -> None:
    """Remove old records from the database (TOOLGATE_DATABASE_URL), keeping the rest of
    the chain verifiable: the last removed record's hash becomes the chain's anchor."""
    import asyncio

    from app.cli.settings import settings_or_exit, sqlite_file
    from app.decisions.prune import prune as prune_log
    from app.store.engine import make_engine, make_sessionmaker

    cut = _moment(before, "before")
    settings = settings_or_exit()  # before the question: a bad setting stops it at once
    database = sqlite_file(settings)
    if database is not None and not database.is_file():  # SQLite would make an empty one
        raise fail(f"no database at {database} (TOOLGATE_DATABASE_URL): nothing to prune")
    if not yes:
        typer.confirm(f"Remove every decision record created before {cut.isoformat()}?",
                      abort=True)

    async def run() -> dict:
        engine = make_engine(settings, long_statements=True)
        try:
            return await prune_log(make_sessionmaker(engine), cut)
        finally:
            await engine.dispose()

    try:
        result = asyncio.run(run())
    except Exception as exc:  # unreachable or refusing database: one line, as `migrate`
        from app.cli.main import _one_line

        typer.echo(f"toolgate: cannot prune the decision log: {_one_line(exc)}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"removed {result['deleted']} records; chain anchored at seq "
               f"{result['anchor_seq']} ({result['anchor_hash']})")
