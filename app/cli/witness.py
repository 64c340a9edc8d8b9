"""`toolgate audit witness`: keep the log's signed checkpoints somewhere the database's
admin cannot write, and say so when the log stops extending them (SPEC §16).

Each round: the latest checkpoint and those since the last one stored, each signature
checked; the export between the last stored checkpoint and the newest verifies from the
stored head to the new one (app/log/checkpoints.py verify_between); no seq gets two
hashes; seq never goes back. Then the notes are stored, one file per checkpoint
(`<seq>.note`). On a fork: one line naming both checkpoints, exit 1."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson

from app.log.checkpoints import Checkpoint, open_checkpoint, verify_between
from app.log.note import NoteError, Verifier

log = logging.getLogger("toolgate.witness")

FORK = 1  # exit status: the log does not extend what this witness holds
UNREACHABLE = 2  # --once: the service could not be asked


class Fork(Exception):
    pass


class Store:
    def __init__(self, folder: str, verifiers: list[Verifier]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.verifiers = verifiers

    def _path(self, seq: int) -> Path:
        return self.folder / f"{seq:020d}.note"

    def at(self, seq: int) -> Checkpoint | None:
        path = self._path(seq)
        return open_checkpoint(path.read_text(), self.verifiers) if path.exists() else None

    def latest(self) -> Checkpoint | None:
        names = sorted(p.name for p in self.folder.glob("*.note"))
        return open_checkpoint((self.folder / names[-1]).read_text(), self.verifiers) \
            if names else None

    def keep(self, point: Checkpoint) -> None:
        temporary = self.folder / f".{point.seq}.tmp"
        temporary.write_text(point.note)
        os.replace(temporary, self._path(point.seq))


def _get(client: httpx.Client, path: str, **params: Any) -> httpx.Response:
    answer = client.get(path, params=params)
    if answer.status_code != 404 and not answer.is_success:
        raise httpx.HTTPError(f"GET {path}: HTTP {answer.status_code} {answer.text[:200]}")
    return answer


def _records(client: httpx.Client, after: int | None, until: int) -> Iterator[dict]:
    params = {"until_seq": until, **({"after_seq": after} if after is not None else {})}
    with client.stream("GET", "/v1/audit/export", params=params) as answer:
        if not answer.is_success:
            answer.read()
            raise httpx.HTTPError(f"export: HTTP {answer.status_code} {answer.text[:200]}")
        for line in answer.iter_lines():
            if line.strip():
                yield orjson.loads(line)


def _fork(stored: Checkpoint | None, new: Checkpoint, why: str) -> Fork:
    return Fork(f"FORK: stored checkpoint "
                f"{stored.describe() if stored else '(none)'} and new checkpoint "
                f"{new.describe()}: {why}")


def round_once(client: httpx.Client, store: Store) -> int:
    """One round; returns how many checkpoints were stored. Raises Fork, NoteError (a
    signature that does not hold) or httpx.HTTPError."""
    stored = store.latest()
    answer = _get(client, "/v1/audit/checkpoint")
    if answer.status_code == 404:
        return 0
    latest = open_checkpoint(answer.json()["note"], store.verifiers)
    if stored is not None and latest.seq <= stored.seq:
        same = store.at(latest.seq)
        if latest.seq < stored.seq:
            raise _fork(stored, latest, f"seq went back from {stored.seq} to {latest.seq}")
        if same is not None and same.head_hash != latest.head_hash:
            raise _fork(same, latest, f"seq {latest.seq} has two hashes")
        return 0
    new: list[Checkpoint] = []
    if stored is None:
        new = [latest]  # the first: the whole export up to it must verify
    else:
        since: str | None = str(stored.seq)
        while since is not None:
            page = _get(client, "/v1/audit/checkpoints", since=since, limit=1000).json()
            for item in page["items"]:
                point = open_checkpoint(item["note"], store.verifiers)
                if point.seq <= latest.seq:
                    new.append(point)
            since = page["next_since"]
            if new and new[-1].seq >= latest.seq:
                break
        if not new or new[-1].seq != latest.seq:
            new.append(latest)
    for point in new:
        same = store.at(point.seq)
        if same is not None and same.head_hash != point.head_hash:
            raise _fork(same, point, f"seq {point.seq} has two hashes")
    why = verify_between(_records(client, stored.seq if stored else None, latest.seq),
                         stored, new)
    if why is not None:
        raise _fork(stored, latest, why)
    for point in new:
        store.keep(point)
    return len(new)


def run(url: str, token: str | None, verifiers: list[Verifier], folder: str,
        every: float, once: bool) -> int:
    store = Store(folder, verifiers)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=60) as client:
        while True:
            try:
                kept = round_once(client, store)
                if kept:
                    newest = store.latest()
                    log.info("witness: stored %d checkpoints, newest %s", kept,
                             newest.describe() if newest else "")
            except Fork as fork:
                log.error("%s", fork)
                return FORK
            except NoteError as exc:
                log.error("FORK: a checkpoint from %s does not verify: %s", url, exc)
                return FORK
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                log.warning("witness: cannot check %s: %s", url, exc)
                if once:
                    return UNREACHABLE
            if once:
                return 0
            time.sleep(every)
