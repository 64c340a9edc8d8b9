"""The `toolgate` command as an operator uses it (subprocesses, bounded in time)."""

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from app.log.chain import GENESIS, record_hash

TOOLGATE = str(Path(sys.executable).with_name("toolgate"))


def _run(*args, env=None, timeout=60):
    return subprocess.run([TOOLGATE, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def _chain(n):
    records, prev = [], GENESIS
    for seq in range(1, n + 1):
        record = {"seq": seq, "decision_id": f"d{seq}", "kind": "authorize",
                  "allowed": seq % 2 == 0, "detail": {"n": seq}, "prev_hash": prev}
        record["hash"] = prev = record_hash(record)
        records.append(record)
    return records


def _write(path, records):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))


def test_offline_verify_finds_altered_removed_reordered(tmp_path):
    records = _chain(6)
    good = tmp_path / "good.jsonl"
    _write(good, records)
    r = _run("audit", "verify", "--json", "--file", str(good))
    assert r.returncode == 0, r.stderr
    assert orjson.loads(r.stdout)["checked"] == 6
    assert orjson.loads(r.stdout)["range"] == {
        "first_seq": 1, "first_decision_id": "d1", "last_seq": 6, "last_decision_id": "d6",
        "count": 6, "anchor": "genesis"}

    altered = [dict(x) for x in records]
    altered[2]["allowed"] = not altered[2]["allowed"]
    for name, variant, seq in [("altered", altered, 3),
                               ("removed", records[:3] + records[4:], 5),
                               ("reordered", records[:2] + [records[3], records[2]] + records[4:],
                                4)]:
        path = tmp_path / f"{name}.jsonl"
        _write(path, variant)
        r = _run("audit", "verify", "--json", "--file", str(path))
        assert r.returncode == 1, name
        assert orjson.loads(r.stdout)["first_bad"]["seq"] == seq, name

    truncated = tmp_path / "truncated.jsonl"
    _write(truncated, records[:5])
    r = _run("audit", "verify", "--json", "--file", str(truncated), "--head", records[-1]["hash"])
    assert r.returncode == 1 and "missing at the end" in r.stdout


def test_offline_verify_prints_a_summary_for_a_person(tmp_path):
    """Issue 35 item 10: without --json, `audit verify` says what was proved in words."""
    records = _chain(6)
    good = tmp_path / "good.jsonl"
    _write(good, records)
    r = _run("audit", "verify", "--file", str(good))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "OK: 6 records intact"
    assert "range: seq 1 (d1) to seq 6 (d6), 6 records, anchored at genesis" in r.stdout
    altered = [dict(x) for x in records]
    altered[2]["allowed"] = not altered[2]["allowed"]
    bad = tmp_path / "bad.jsonl"
    _write(bad, altered)
    r = _run("audit", "verify", "--file", str(bad))
    assert r.returncode == 1
    assert r.stdout.startswith("BROKEN at seq 3"), r.stdout
    assert "2 records checked before it" in r.stdout


def test_offline_verify_refuses_a_file_cut_at_the_start_or_empty(tmp_path):
    """Issue 22 item 6: `tail -n +3 export.jsonl` and an empty file were "ok". A file must
    start at the chain's first record (or at a prune anchor it names) unless --partial."""
    records = _chain(6)
    cut = tmp_path / "cut.jsonl"
    _write(cut, records[2:])
    r = _run("audit", "verify", "--json", "--file", str(cut))
    assert r.returncode == 1, r.stdout
    out = orjson.loads(r.stdout)
    assert out["ok"] is False and out["first_bad"]["seq"] == 3
    assert "older records may have been removed" in out["first_bad"]["reason"]
    r = _run("audit", "verify", "--json", "--file", str(cut), "--partial")
    assert r.returncode == 0, r.stdout
    assert orjson.loads(r.stdout)["range"] == {
        "first_seq": 3, "first_decision_id": "d3", "last_seq": 6, "last_decision_id": "d6",
        "count": 4, "anchor": "none"}

    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n")
    for extra in ([], ["--partial"]):
        r = _run("audit", "verify", "--json", "--file", str(empty), *extra)
        assert r.returncode == 1, (extra, r.stdout)
        assert orjson.loads(r.stdout)["range"] is None
        assert "no records" in orjson.loads(r.stdout)["first_bad"]["reason"]

    not_records = tmp_path / "array.jsonl"
    not_records.write_bytes(b"[1, 2]\n")
    r = _run("audit", "verify", "--json", "--file", str(not_records))
    assert r.returncode == 1 and "line 1 is not a JSON record" in r.stdout


def test_migrate_and_serve_refuses_a_postgres_schema_behind(database_url, tmp_path):
    if database_url.startswith("sqlite"):
        r = _run("migrate", env={"TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/x.db"})
        assert r.returncode == 0 and "schema at" in r.stdout
        return
    from alembic import command

    from app.store import migrate
    command.downgrade(migrate.alembic_config(database_url), "0001")
    r = _run("serve", "--port", "1", env={"TOOLGATE_DATABASE_URL": database_url}, timeout=60)
    assert r.returncode == 2
    assert "toolgate migrate" in r.stderr
    r = _run("migrate", env={"TOOLGATE_DATABASE_URL": database_url})
    assert r.returncode == 0
    assert migrate.current(database_url) == migrate.head(database_url)


def test_serve_on_sqlite_refuses_a_schema_ahead_not_marked_for_it(tmp_path):
    """A rollback on one host: the newer release migrated the file; this one must not try
    to migrate it (it cannot: it does not know the revision) and says why it stops."""
    from alembic import command

    from app.store import migrate
    from tests.store.test_migrations import _future_release

    url = f"sqlite+aiosqlite:///{tmp_path}/x.db"
    command.upgrade(_future_release(tmp_path, url, ("f001", False)), "head")
    r = _run("serve", "--port", "1", env={"TOOLGATE_DATABASE_URL": url})
    assert r.returncode == 2, r.stderr
    assert "ahead of this release" in r.stderr and "f001" in r.stderr
    assert migrate.current(url) == "f001"


@pytest.mark.slow
def test_serve_starts_on_a_schema_ahead_marked_as_served_by_it(database_url, tmp_path):
    """Issue 22 item 12: a restart (or scale-up, or rollback) during a rolling upgrade. The
    next release's expand-only migration has run; this release starts, is ready, decides."""
    import httpx
    from alembic import command

    from app.store import migrate
    from tests.serving import serve, stop
    from tests.store.test_migrations import _future_release

    command.upgrade(_future_release(tmp_path, database_url, ("f001", True)), "head")
    proc, url = serve({"TOOLGATE_DATABASE_URL": database_url,
                       "TOOLGATE_ADMIN_TOKEN": "rolling"}, tmp_path / "serve.log")
    try:
        r = httpx.post(f"{url}/v1/authorize-tool", headers={"Authorization": "Bearer rolling"},
                       json={"tool": {"name": "t", "capability": {
                           "writes": False, "checkpointable": True, "unsafe": False}}},
                       timeout=30)
        assert r.status_code == 200 and r.json()["allowed"] is True, r.text
    finally:
        stop(proc)
    assert "ahead of this release" in (tmp_path / "serve.log").read_text()
    assert migrate.current(database_url) == "f001"


def test_a_bad_setting_stops_serve_naming_the_variable(tmp_path):
    r = _run("serve", "--port", "1", env={
        "TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/x.db",
        "TOOLGATE_DECISION_LOG_WRITER_NICE": "20", "TOOLGATE_DECISION_LOG_WRITER": "bogus"})
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "TOOLGATE_DECISION_LOG_WRITER_NICE: Input should be less than or equal to 19" in r.stderr
    assert "TOOLGATE_DECISION_LOG_WRITER: Input should be 'auto', 'process' or 'inline'" in r.stderr
    assert not (tmp_path / "x.db").exists()  # nothing done


def test_an_unknown_log_level_stops_serve_in_one_line(tmp_path):
    r = _run("serve", "--port", "1", env={
        "TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/x.db",
        "TOOLGATE_LOG_LEVEL": "bogus"})
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [
        "toolgate: TOOLGATE_LOG_LEVEL: Input should be 'critical', 'error', 'warning', "
        "'info', 'debug' or 'trace'"]
    assert not (tmp_path / "x.db").exists()


def test_a_bad_setting_stops_audit_prune_naming_the_variable(tmp_path):
    """`toolgate audit prune` opens the database itself: a bad setting stops it like serve,
    before it asks anything or touches the log."""
    r = _run("audit", "prune", "--before", "2020-01-01", "--yes", env={
        "TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/x.db",
        "TOOLGATE_DECISION_LOG_TIMEOUT_SECONDS": "soon"})
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "TOOLGATE_DECISION_LOG_TIMEOUT_SECONDS: Input should be a valid number" in r.stderr
    assert not (tmp_path / "x.db").exists()


def test_migrate_takes_the_plain_database_urls_platforms_hand_out(database_url, tmp_path):
    """postgresql:// (postgres://) and sqlite:/// as libpq and hosting platforms write them:
    toolgate uses its own drivers for them. Before, a plain postgresql:// URL failed with
    a traceback (no psycopg installed)."""
    from app.store import migrate

    if database_url.startswith("sqlite"):
        plain, path = f"sqlite:///{tmp_path}/plain.db", tmp_path / "plain.db"
    else:
        plain = database_url.replace("postgresql+asyncpg://", "postgres://") + "?sslmode=disable"
        path = None
        from alembic import command
        command.downgrade(migrate.alembic_config(database_url), "0001")
    r = _run("migrate", env={"TOOLGATE_DATABASE_URL": plain})
    assert r.returncode == 0 and "schema at" in r.stdout, r.stderr
    if path is not None:
        assert path.exists()
    else:
        assert migrate.current(database_url) == migrate.head(database_url)


def test_a_database_url_toolgate_cannot_use_stops_naming_the_variable(tmp_path):
    for url in ("mysql://root@127.0.0.1/toolgate", "postgresql+psycopg://u@h/db",
                f"{tmp_path}/x.db"):
        r = _run("migrate", env={"TOOLGATE_DATABASE_URL": url})
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "TOOLGATE_DATABASE_URL: Value error, not a database URL toolgate can use: " \
               "postgresql://user@host:5432/db or sqlite:///path/to/file.db" in r.stderr
    assert not list(tmp_path.iterdir())  # nothing created
