"""Signed checkpoints from the command line (SPEC §16): the signing key, an export checked
against a checkpoint, and a witness that catches a history rewritten in the database and
served again with the same key. Real `toolgate serve` processes, bounded waits."""

from __future__ import annotations

import asyncio
import os
import stat
import time

import httpx
import orjson
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.log.chain import record_hash
from tests.cli.test_cli import _run
from tests.serving import serve, stop

ADMIN = "checkpoint-admin"
TOOL = {"name": "t", "capability": {"writes": False, "checkpointable": True, "unsafe": False}}


def test_signing_key_new_writes_a_private_key_once(tmp_path):
    path = tmp_path / "log.key"
    made = _run("keys", "signing-key", "new", str(path), "--origin", "example.com/log")
    assert made.returncode == 0, made.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().startswith("PRIVATE+KEY+example.com/log+")
    assert made.stdout.strip().startswith("example.com/log+")  # the verifier key
    before = path.read_text()
    again = _run("keys", "signing-key", "new", str(path))
    assert again.returncode != 0 and "never overwritten" in again.stderr
    assert path.read_text() == before
    bad = _run("keys", "signing-key", "new", str(tmp_path / "b.key"), "--origin", "a b")
    assert bad.returncode != 0 and "--origin" in bad.stderr
    assert not (tmp_path / "b.key").exists()
    # A file that is not a key stops serve naming the variable.
    (tmp_path / "junk.key").write_text("not a key\n")
    refused = _run("serve", "--port", "1", env={"TOOLGATE_LOG_SIGNING_KEY":
                                                 str(tmp_path / "junk.key")})
    assert refused.returncode == 2 and "TOOLGATE_LOG_SIGNING_KEY" in refused.stderr


class Service:
    def __init__(self, database_url: str, key: str, folder) -> None:
        self.env = {"TOOLGATE_DATABASE_URL": database_url, "TOOLGATE_ADMIN_TOKEN": ADMIN,
                    "TOOLGATE_LOG_SIGNING_KEY": key, "TOOLGATE_CHECKPOINT_SECONDS": "0.2",
                    # Nothing here is about time: room for a machine under load.
                    "TOOLGATE_DECISION_LOG_TIMEOUT_SECONDS": "60"}
        self.folder = folder
        # A loaded machine (the suite beside other work) can take a while to start one.
        self.proc, self.url = serve(self.env, folder / "serve.log", timeout=240)

    def get(self, path: str, **params) -> httpx.Response:
        return httpx.get(self.url + path, params=params, timeout=30,
                         headers={"Authorization": f"Bearer {ADMIN}"})

    def decide(self, count: int) -> None:
        for _ in range(count):
            answer = httpx.post(self.url + "/v1/authorize-tool", json={"tool": TOOL},
                                headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
            assert answer.status_code == 200, answer.text

    def signed_head(self) -> dict:
        """The checkpoint of the head as it is now (polling: the writer signs on its own
        interval), once every record so far is signed."""
        head = self.get("/v1/audit/verify").json()["range"]["last_seq"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            answer = self.get("/v1/audit/checkpoint")
            if answer.status_code == 200 and answer.json()["seq"] >= head - 1:
                return answer.json()
            time.sleep(0.05)
        raise AssertionError("no checkpoint of the head within 60 s")

    def stop(self) -> None:
        stop(self.proc)


def _witness(service: Service, key: str, store, token: str):
    return _run("audit", "witness", "--url", service.url, "--public-key", key, "--store",
                str(store), "--once", env={"TOOLGATE_TOKEN": token})


def _forged(records: list[dict]) -> list[dict]:
    """The issue's forgery: `allowed` flipped a third of the way in, every later prev_hash
    and hash recomputed (SHA-256 of the sorted-key JSON, docs/decision-log.md)."""
    forged = [dict(r) for r in records]
    at = next(i for i in range(len(forged) // 3, len(forged))
              if forged[i]["allowed"] is not None)
    forged[at]["allowed"] = not forged[at]["allowed"]
    prev = forged[at]["prev_hash"]
    for record in forged[at:]:
        record["prev_hash"] = prev
        record["hash"] = prev = record_hash(record)
    return forged


async def _rewrite(database_url: str, forged: list[dict]) -> None:
    """What someone who can write the database does: the forged rows, the chain head
    moved to match, and the checkpoints that would betray it deleted."""
    engine = create_async_engine(database_url)
    try:
        async with engine.begin() as conn:
            for record in forged:
                await conn.execute(text("UPDATE decision_log SET allowed = :a, prev_hash = "
                                        ":p, hash = :h WHERE seq = :s"),
                                   {"a": record["allowed"], "p": record["prev_hash"],
                                    "h": record["hash"], "s": record["seq"]})
            await conn.execute(text("UPDATE chain_head SET hash = :h WHERE id = 1"),
                               {"h": forged[-1]["hash"]})
            await conn.execute(text("DELETE FROM log_checkpoints"))
    finally:
        await engine.dispose()


def test_checkpoints_catch_a_rewritten_history(database_url, tmp_path):
    key_file = tmp_path / "log.key"
    public = _run("keys", "signing-key", "new", str(key_file), "--origin", "toolgate.test/log")
    assert public.returncode == 0, public.stderr
    verifier_key = public.stdout.strip()
    store = tmp_path / "witness"
    service = Service(database_url, str(key_file), tmp_path)
    try:
        auditor = httpx.post(service.url + "/v1/keys", json={"name": "witness", "projects": None,
                                                              "role": "auditor"},
                             headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
        token = auditor.json()["key"]
        assert service.get("/v1/audit/public-key").json()["verifier_key"] == verifier_key
        service.decide(12)
        point = service.signed_head()
        (tmp_path / "checkpoint.json").write_text(orjson.dumps(point).decode())
        (tmp_path / "checkpoint.note").write_text(point["note"])
        records = [orjson.loads(line) for line in service.get("/v1/audit/export").text
                   .splitlines()]
        witnessed = _witness(service, verifier_key, store, token)
        assert witnessed.returncode == 0, witnessed.stderr
        service.decide(5)
        second = service.signed_head()
        extended = _witness(service, verifier_key, store, token)
        assert extended.returncode == 0, extended.stderr
        assert sorted(os.listdir(store))[-1] == f"{second['seq']:020d}.note"
    finally:
        service.stop()

    export = tmp_path / "export.jsonl"
    export.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    for saved in ("checkpoint.json", "checkpoint.note"):
        honest = _run("audit", "verify", "--json", "--file", str(export), "--checkpoint",
                      str(tmp_path / saved), "--public-key", verifier_key)
        assert honest.returncode == 0, honest.stdout + honest.stderr
        assert orjson.loads(honest.stdout)["checkpoint"]["holds"] is True
    forged = _forged(records)
    forged_file = tmp_path / "forged.jsonl"
    forged_file.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in forged))
    alone = _run("audit", "verify", "--json", "--file", str(forged_file))
    assert alone.returncode == 0  # the chain alone cannot tell
    against = _run("audit", "verify", "--json", "--file", str(forged_file), "--checkpoint",
                   str(tmp_path / "checkpoint.note"), "--public-key", verifier_key)
    assert against.returncode == 1
    assert "history was rewritten" in orjson.loads(against.stdout)["first_bad"]["reason"]
    other = _run("keys", "signing-key", "new", str(tmp_path / "other.key"),
                 "--origin", "toolgate.test/log").stdout.strip()
    wrong_key = _run("audit", "verify", "--json", "--file", str(export), "--checkpoint",
                     str(tmp_path / "checkpoint.note"), "--public-key", other)
    assert wrong_key.returncode == 1 and "does not verify" in wrong_key.stderr

    # The database rewritten from a third of the way in, the service started on it again
    # with the same key: it signs the forged chain, and the witness says fork.
    whole = [orjson.loads(line) for line in _export_all(database_url)]
    asyncio.run(_rewrite(database_url, _forged(whole)))
    service = Service(database_url, str(key_file), tmp_path)
    try:
        assert service.get("/v1/audit/verify").json()["ok"] is True  # consistent again
        service.decide(3)
        third = service.signed_head()
        forked = _witness(service, verifier_key, store, token)
    finally:
        service.stop()
    assert forked.returncode == 1, forked.stdout + forked.stderr
    lines = [line for line in forked.stderr.splitlines() if "FORK" in line]
    assert len(lines) == 1
    assert f"seq {second['seq']} head_hash {second['head_hash']}" in lines[0]
    assert f"seq {third['seq']} head_hash {third['head_hash']}" in lines[0]


def _export_all(database_url: str) -> list[bytes]:
    """The stored log, read with the app's own export (no server running)."""
    from app.config import Settings
    from app.decisions import queries
    from app.store.engine import make_engine, make_sessionmaker

    async def run() -> list[bytes]:
        engine = make_engine(Settings(database_url=database_url))
        try:
            return [orjson.dumps(r) async for r in
                    queries.stream(make_sessionmaker(engine), None, None)]
        finally:
            await engine.dispose()

    return asyncio.run(run())


class _FakeLog:
    """A service's audit routes as the witness reads them (GET /v1/audit/checkpoint,
    /checkpoints?since=, /export?after_seq=&until_seq=), over records and notes the test
    sets: what a service that rewrote or rolled back its log would answer."""

    def __init__(self, signer, records: list[dict]) -> None:
        self.signer, self.records, self.points = signer, records, []

    def sign(self, seq: int, head_hash: str | None = None) -> None:
        from app.log.checkpoints import make

        _, row = make(self.signer, seq, head_hash or self.records[seq - 1]["hash"],
                      f"2026-01-01T00:00:{seq:02d}.000000Z")
        self.points.append(row)

    def client(self) -> httpx.Client:
        def answer(request: httpx.Request) -> httpx.Response:
            q = request.url.params
            if request.url.path == "/v1/audit/checkpoint":
                return httpx.Response(200, json=self.points[-1]) if self.points else \
                    httpx.Response(404, json={})
            if request.url.path == "/v1/audit/checkpoints":
                since = int(q.get("since", "0"))
                return httpx.Response(200, json={"next_since": None, "items": [
                    p for p in self.points if p["seq"] > since]})
            after, until = int(q.get("after_seq", "0")), int(q["until_seq"])
            return httpx.Response(200, content=b"".join(
                orjson.dumps(r) + b"\n" for r in self.records if after < r["seq"] <= until))
        return httpx.Client(base_url="http://log", transport=httpx.MockTransport(answer))


def test_the_witness_refuses_a_seq_that_goes_back_or_gets_a_second_hash(tmp_path):
    """The witness's own rules (SPEC §16), one round each: a log that extends what it
    stored is stored; a latest checkpoint behind the stored one, a seq signed with another
    hash, a chain that does not lead from the stored head, or a note another key signed,
    is a fork, and nothing new is stored."""
    import pytest

    from app.cli.witness import Fork, Store, round_once
    from app.log.note import NoteError, Signer
    from tests.cli.test_cli import _chain

    signer = Signer.generate("toolgate.test/log")
    records = _chain(12)
    log = _FakeLog(signer, records)
    store = Store(str(tmp_path / "store"), [signer.verifier()])
    log.sign(4)
    assert round_once(log.client(), store) == 1
    log.sign(8)
    log.sign(10)
    assert round_once(log.client(), store) == 2  # 8 and 10, the export 5..10 verifying
    assert store.latest().seq == 10
    assert round_once(log.client(), store) == 0  # nothing new

    held = sorted(p.name for p in store.folder.glob("*.note"))
    cases = {
        "seq went back from 10 to 8": lambda fake: fake.points.append(fake.points[1]),
        "seq 10 has two hashes": lambda fake: fake.sign(10, "f" * 64),
    }
    for why, change in cases.items():
        fake = _FakeLog(signer, records)
        fake.points = list(log.points)
        change(fake)
        with pytest.raises(Fork, match=why) as raised:
            round_once(fake.client(), store)
        assert "stored checkpoint seq 10 head_hash" in str(raised.value)
    # A history rewritten from seq 6 on, with recomputed hashes, signed again at 12.
    forged = [dict(r) for r in records]
    forged[5]["allowed"] = not forged[5]["allowed"]
    prev = forged[5]["prev_hash"]
    for record in forged[5:]:
        record["prev_hash"] = prev
        record["hash"] = prev = record_hash(record)
    rewritten = _FakeLog(signer, forged)
    rewritten.sign(12)
    with pytest.raises(Fork, match="does not verify|history was rewritten"):
        round_once(rewritten.client(), store)
    # The same head signed by a key the witness does not hold.
    stranger = _FakeLog(Signer.generate("toolgate.test/log"), records)
    stranger.sign(12)
    with pytest.raises(NoteError):
        round_once(stranger.client(), store)
    assert sorted(p.name for p in store.folder.glob("*.note")) == held


@pytest.mark.slow
def test_serve_says_in_one_line_whether_it_signs_and_with_which_key(tmp_path):
    """Issue 45 item 13: `toolgate serve` says whether checkpoint signing is on, with the
    origin and key id an auditor's verifier key must show, or that it is off."""
    key_file = tmp_path / "log.key"
    public = _run("keys", "signing-key", "new", str(key_file), "--origin", "toolgate.test/log")
    assert public.returncode == 0, public.stderr
    origin, key_id, _ = public.stdout.strip().split("+", 2)
    for signing, expected in (
            ({"TOOLGATE_LOG_SIGNING_KEY": str(key_file)},
             f"toolgate: checkpoint signing is on: origin {origin}, key id {key_id}, every "),
            ({}, "toolgate: checkpoint signing is off (no TOOLGATE_LOG_SIGNING_KEY)")):
        log = tmp_path / f"serve-{len(signing)}.log"
        proc, _ = serve({"TOOLGATE_DATABASE_URL": f"sqlite:///{tmp_path / 's.db'}",
                         "TOOLGATE_ADMIN_TOKEN": ADMIN, **signing}, log, timeout=240)
        stop(proc)
        lines = [line for line in log.read_text().splitlines() if "checkpoint signing" in line]
        assert len(lines) == 1 and lines[0].startswith(expected), lines
