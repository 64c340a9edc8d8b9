"""A decision log rewritten with recomputed hashes under a running service (issue 45 item 5):
the service signs no checkpoint over it (its last checkpoint's head is no longer in the
log), GET /readyz answers degraded, and GET /v1/audit/checkpoint, which the page's audit
view shows, says signing stopped. On SQLite and Postgres."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.log.note import Signer
from tests.conftest import app_client
from tests.decisions.test_checkpoints import decide, export, forge, wait_for_checkpoint


async def _rewrite(database_url: str, forged: list[dict]) -> None:
    """The forger's write: the rows and the chain head, the checkpoints left as they were."""
    engine = create_async_engine(database_url)
    try:
        async with engine.begin() as conn:
            for record in forged:
                await conn.execute(text("UPDATE decision_log SET allowed = :a, prev_hash = :p,"
                                        " hash = :h WHERE seq = :s"),
                                   {"a": record["allowed"], "p": record["prev_hash"],
                                    "h": record["hash"], "s": record["seq"]})
            await conn.execute(text("UPDATE chain_head SET hash = :h WHERE id = 1"),
                               {"h": forged[-1]["hash"]})
    finally:
        await engine.dispose()


async def _until(client, path: str, holds, deadline: float = 120) -> dict:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        answer = await client.get(path)
        if answer.status_code == 200 and holds(answer.json()):
            return answer.json()
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path}: not within {deadline} s: {answer.text}")


async def test_a_rewritten_log_is_not_signed_and_readyz_says_degraded(settings, tmp_path):
    key = tmp_path / "log.key"
    key.write_text(Signer.generate("toolgate.test/log").key() + "\n")
    signed = settings.model_copy(update={"log_signing_key": str(key), "checkpoint_seconds": 0.2,
                                         "decision_log_timeout_seconds": 60})
    async with app_client(signed) as client:
        await decide(client, 4)
        await wait_for_checkpoint(client)
        # Until the log's last record is the latest checkpoint's own: every decision signed,
        # nothing more to sign (a checkpoint between the export and the rewrite would sign
        # the head the forger then rewrites around).
        for _ in range(2400):  # 120 s at most
            point = (await client.get("/v1/audit/checkpoint")).json()
            records = await export(client)
            if records[-1]["seq"] == point["record_seq"]:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"the log kept growing past its checkpoints: {point}")
        assert (await client.get("/readyz")).json() == {"status": "ready"}
        await _rewrite(signed.database_url, forge(records, 0))  # all of it, recomputed
        await decide(client, 3)
        # The decisions made after the rewrite are chained (onto the forged head)...
        await _until(client, "/v1/decisions?limit=1", lambda body: body["items"] and
                     body["items"][0]["seq"] >= records[-1]["seq"] + 3)
        ready = await _until(client, "/readyz", lambda body: True)
        assert ready["status"] == "degraded", ready
        assert f"contradicts its checkpoint at seq {point['seq']}" in ready["checkpoints"]
        # ...and over ten intervals no checkpoint is signed over them.
        await asyncio.sleep(10 * 0.2)
        latest = (await client.get("/v1/audit/checkpoint")).json()
        assert latest["seq"] == point["seq"], latest
        assert latest["verifies"] is False and latest["signing_stopped"] is True
        assert latest["problem"] == (f"the record at seq {point['seq']} no longer has the "
                                     "signed head_hash")


def test_the_writer_refuses_to_sign_over_a_contradicting_log():
    from app.log.checkpoints import Forged, contradiction
    from app.log.writer.common import _now as now
    from app.log.writer.common import checkpoint_due

    signer = Signer.generate("toolgate.test/log")
    moment = now()
    last = (5, moment.replace(year=moment.year - 1))
    held = (5, moment, 4, "a" * 64, "b" * 64, 0, "0" * 64)  # the record at 4 has another hash
    with pytest.raises(Forged, match="contradicts its checkpoint at seq 4"):
        checkpoint_due(signer, 1.0, 9, "c" * 64, moment, last, held)
    honest = (5, moment, 4, "a" * 64, "a" * 64, 0, "0" * 64)
    assert checkpoint_due(signer, 1.0, 9, "c" * 64, moment, last, honest) is not None
    assert contradiction(4, "a" * 64, None, 7, "d" * 64) is None  # pruned past it
    assert contradiction(4, "a" * 64, None, 4, "d" * 64) is not None  # the anchor differs
