"""Signed checkpoints (SPEC §16): the writer signs the chain head every interval in which
the log grew, as a chained record and a stored note; the routes serve them; a history
rewritten with recomputed hashes fails against a checkpoint taken before."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from pathlib import Path

import orjson
import pytest

from app.log.chain import record_hash, verify
from app.log.checkpoints import Against, open_checkpoint, verify_between
from app.log.note import NoteError, Signer, Verifier
from tests.conftest import app_client

TOOL = {"name": "t", "capability": {"writes": False, "checkpointable": True, "unsafe": False}}


def signing_key(folder: Path, origin: str = "toolgate.test/log") -> tuple[str, Signer]:
    signer = Signer.generate(origin)
    path = folder / f"{origin.replace('/', '_')}.key"
    path.write_text(signer.key() + "\n")
    path.chmod(0o600)
    return str(path), signer


async def wait_for_checkpoint(client, after: int = 0, deadline: float = 60) -> dict:
    """Poll (the writer signs on its own interval) until a checkpoint past `after`."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        answer = await client.get("/v1/audit/checkpoint")
        if answer.status_code == 200 and answer.json()["seq"] > after:
            return answer.json()
        await asyncio.sleep(0.05)
    raise AssertionError(f"no checkpoint past seq {after} within {deadline}s")


async def decide(client, count: int) -> None:
    for _ in range(count):
        answer = await client.post("/v1/authorize-tool", json={"tool": TOOL})
        assert answer.status_code == 200, answer.text


async def export(client) -> list[dict]:
    return [orjson.loads(line) for line in
            (await client.get("/v1/audit/export")).text.splitlines()]


def forge(records: list[dict], at: int) -> list[dict]:
    """The issue's forgery: flip `allowed` on the record at index `at`, then recompute every
    later prev_hash and hash as docs/decision-log.md describes."""
    forged = [dict(r) for r in records]
    forged[at]["allowed"] = not forged[at]["allowed"]
    prev = forged[at]["prev_hash"]
    for record in forged[at:]:
        record["prev_hash"] = prev
        record["hash"] = prev = record_hash(record)
    return forged


@pytest.fixture
def signed(settings, tmp_path):
    path, signer = signing_key(tmp_path)
    # Nothing here is about time: room for a machine under load (a 503 otherwise).
    return settings.model_copy(update={"log_signing_key": path, "checkpoint_seconds": 0.2,
                                       "decision_log_timeout_seconds": 60}), \
        signer


async def test_no_key_no_checkpoint(client):
    await decide(client, 2)
    assert (await client.get("/v1/audit/checkpoint")).status_code == 404
    assert (await client.get("/v1/audit/public-key")).status_code == 404
    assert (await client.get("/v1/audit/checkpoints")).json() == {"items": [],
                                                                  "next_since": None}


async def test_checkpoints_sign_the_head_and_a_forgery_fails_against_them(signed):
    settings, signer = signed
    async with app_client(settings) as client:
        await decide(client, 3)
        first = await wait_for_checkpoint(client)
        assert first["verifies"] is True and first["origin"] == "toolgate.test/log"
        verifier = Verifier.parse((await client.get("/v1/audit/public-key")).json()
                                  ["verifier_key"])
        assert verifier.key() == signer.verifier().key()
        first_point = open_checkpoint(first["note"], [verifier])
        assert (first_point.seq, first_point.head_hash) == (first["seq"], first["head_hash"])
        records = await export(client)
        # The checkpoint is itself the chain's next record, of kind checkpoint.
        held = records[first["record_seq"] - 1]
        assert held["kind"] == "checkpoint" and held["detail"]["note"] == first["note"]
        assert records[first_point.seq - 1]["hash"] == first_point.head_hash
        await decide(client, 6)
        records = await export(client)
        # No growth, no new checkpoint: once the last decision is signed, the log's last
        # record stays that checkpoint's own over several more intervals (5 x 0.2 s).
        last = await wait_for_checkpoint(client, records[-1]["seq"] - 2)
        await asyncio.sleep(1.0)
        assert (await client.get("/v1/audit/checkpoint")).json()["seq"] == last["seq"]
        records = await export(client)
        assert records[-1]["seq"] == last["record_seq"]
    point = open_checkpoint(last["note"], [verifier])
    assert verify(records).ok
    honest = Against([point])
    for record in records:
        honest.feed(record)
    assert honest.result() is None
    forged = forge(records, len(records) // 3)  # before the last checkpoint's head
    assert verify(forged).ok  # the chain alone does not see it
    check = Against([point])
    for record in forged:
        check.feed(record)
    assert "history was rewritten" in check.result()
    # The witness's check: the forged records after the first checkpoint do not lead to
    # the last one (the chain breaks at the first checkpoint, or misses the last).
    assert verify_between(forged[first_point.seq:], first_point, [point]) is not None
    between = forge(records, first["record_seq"] + 1)  # after the first, before the last
    assert verify_between(between[first_point.seq:], first_point, [point]) is not None
    assert verify_between(records[first_point.seq:], first_point, [point]) is None


async def test_checkpoints_list_and_extend(signed):
    settings, _ = signed
    async with app_client(settings) as client:
        await decide(client, 3)
        one = await wait_for_checkpoint(client)
        await decide(client, 3)
        two = await wait_for_checkpoint(client, one["seq"])
        listed = (await client.get("/v1/audit/checkpoints")).json()
        seqs = [c["seq"] for c in listed["items"]]
        assert seqs == sorted(seqs) and {one["seq"], two["seq"]} <= set(seqs)
        after = (await client.get("/v1/audit/checkpoints",
                                  params={"since": str(one["seq"]), "limit": 1})).json()
        assert after["items"][0]["seq"] > one["seq"]
        bad = await client.get("/v1/audit/checkpoints", params={"since": "yesterday"})
        assert bad.status_code == 422 and "since" in bad.text
        records = await export(client)
    verifier = Verifier.parse(one["verifier_key"])
    a, b = open_checkpoint(one["note"], [verifier]), open_checkpoint(two["note"], [verifier])
    assert verify_between(records[a.seq:], a, [b]) is None
    assert verify_between(records, None, [a, b]) is None
    # The signed head itself rewritten (index a.seq - 1 is seq a.seq; a.seq may be 1
    # when the writer signed after the first decision alone).
    forged = forge(records, a.seq - 1)
    assert verify_between(forged[a.seq:], a, [b]) is not None


async def test_a_prune_cuts_at_a_checkpoint_which_it_names_and_keeps(signed):
    from datetime import UTC, datetime

    from app.decisions.prune import prune

    settings, signer = signed
    async with app_client(settings) as client:
        await decide(client, 3)
        one = await wait_for_checkpoint(client)
        await decide(client, 3)
        two = await wait_for_checkpoint(client, one["seq"])
        await decide(client, 1)  # after the checkpoint, before the cut: kept all the same
        cut = datetime.now(UTC)
        await decide(client, 2)
        result = await prune(client.app.state.sessions, cut)
        latest = await wait_for_checkpoint(client, two["seq"])
        named = result["checkpoint"]  # the newest checkpoint before the cut
        assert named["seq"] >= two["seq"]
        assert (result["anchor_seq"], result["anchor_hash"]) == (named["seq"],
                                                                 named["head_hash"])
        records = await export(client)
        listed = [c["seq"] for c in (await client.get("/v1/audit/checkpoints")).json()["items"]]
        assert one["seq"] in listed  # its record is gone, the checkpoint is not
        status = (await client.get("/v1/audit/verify")).json()
        assert status["ok"] and status["range"]["anchor"] == "prune"
        assert latest["verifies"] is True
    assert records[0]["kind"] == "checkpoint" and records[0]["detail"]["seq"] == named["seq"]
    pruning = next(r for r in records if r["kind"] == "config")
    assert pruning["detail"]["after"]["checkpoint"]["note"] == named["note"]
    assert verify(records).ok
    point = open_checkpoint(named["note"], [signer.verifier()])
    check = Against([point])
    for record in records:
        check.feed(record)
    assert check.result() is None


async def test_two_writers_on_one_database_make_one_sequence(signed):
    """Two servers (replicas), each with its own writer, one database and one key: the
    checkpoints are one sequence, each the record right after the head it signs, at most
    one an interval between them."""
    settings, signer = signed
    async with app_client(settings) as one, app_client(settings) as two:
        for _ in range(6):
            await decide(one, 2)
            await decide(two, 2)
            await asyncio.sleep(0.1)
        await wait_for_checkpoint(one)
        listed = (await one.get("/v1/audit/checkpoints")).json()["items"]
        records = await export(one)
    assert verify(records).ok
    by_seq = {r["seq"]: r for r in records}
    assert len(listed) >= 1
    times = []
    for point in listed:
        held = by_seq[point["record_seq"]]
        assert point["record_seq"] == point["seq"] + 1 and held["kind"] == "checkpoint"
        assert held["prev_hash"] == point["head_hash"] == by_seq[point["seq"]]["hash"]
        assert open_checkpoint(point["note"], [signer.verifier()]).seq == point["seq"]
        times.append(datetime.fromisoformat(point["time"].replace("Z", "+00:00")))
    kinds = [r["kind"] for r in records]
    assert sum(k == "checkpoint" for k in kinds) == len(listed)
    # Never two checkpoints of one interval (the due rule's slack is a tenth of it).
    assert all((b - a).total_seconds() >= 0.9 * 0.2 for a, b in zip(times, times[1:], strict=False))


async def test_a_rotated_key_signs_from_its_first_checkpoint_and_both_are_listed(signed,
                                                                               tmp_path):
    """Key rotation (SPEC §16, docs/checkpoints.md): restarted with a new key, the service
    signs its checkpoints with it; GET /v1/audit/public-key lists the old key with the seq
    range it signed and the new one, current, from its first checkpoint; each stored note
    verifies by the key listed for its seq, and the latest checkpoint still `verifies`."""
    settings, old = signed
    async with app_client(settings) as client:
        await decide(client, 3)
        before = await wait_for_checkpoint(client)
        listed = (await client.get("/v1/audit/public-key")).json()
        assert listed["keys"] == [{"verifier_key": old.verifier().key(), "current": True,
                                   "first_seq": listed["keys"][0]["first_seq"],
                                   "last_seq": before["seq"]}]
    rotated = tmp_path / "rotated"  # a new file, the same origin (docs/checkpoints.md)
    rotated.mkdir()
    path, new = signing_key(rotated)
    async with app_client(settings.model_copy(update={"log_signing_key": path})) as client:
        unsigned = (await client.get("/v1/audit/public-key")).json()
        assert unsigned["verifier_key"] == new.verifier().key()
        assert unsigned["keys"][-1] == {"verifier_key": new.verifier().key(),
                                        "first_seq": None, "last_seq": None, "current": True}
        await decide(client, 3)
        after = await wait_for_checkpoint(client, before["seq"])
        assert after["verifies"] is True
        assert after["verifier_key"] == new.verifier().key()
        keys = (await client.get("/v1/audit/public-key")).json()
        points = (await client.get("/v1/audit/checkpoints")).json()["items"]
    assert keys["verifier_key"] == new.verifier().key()
    old_entry, new_entry = keys["keys"]
    assert (old_entry["verifier_key"], old_entry["current"]) == (old.verifier().key(), False)
    assert (new_entry["verifier_key"], new_entry["current"]) == (new.verifier().key(), True)
    assert old_entry["last_seq"] < new_entry["first_seq"] <= after["seq"]
    assert new_entry["last_seq"] == after["seq"]
    for point in points:
        entry = old_entry if point["seq"] <= old_entry["last_seq"] else new_entry
        assert entry["first_seq"] <= point["seq"] <= entry["last_seq"]
        verifier = Verifier.parse(entry["verifier_key"])
        assert open_checkpoint(point["note"], [verifier]).seq == point["seq"]
        other = Verifier.parse((new_entry if entry is old_entry else old_entry)
                               ["verifier_key"])
        with pytest.raises(NoteError):
            open_checkpoint(point["note"], [other])
