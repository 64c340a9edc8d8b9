"""Pure parts of the faithful proxy (SPEC §19), without processes: a resources/read's
decision arguments, and the 2026-07-28 confirmation state (single-use, bound to the call,
expiring, the gateway's own)."""

from __future__ import annotations

import pytest

from app.gateway import mapping, server
from app.gateway.config import ServerConfig


@pytest.mark.parametrize(("uri", "args", "path_args"), [
    ("demo://resource/1", {"uri": "demo://resource/1"}, []),
    ("file:///srv/work/a.txt", {"uri": "file:///srv/work/a.txt", "path": "/srv/work/a.txt"},
     ["path"]),
    ("file://localhost/srv/a%20b.txt",
     {"uri": "file://localhost/srv/a%20b.txt", "path": "/srv/a b.txt"}, ["path"]),
    ("FILE:///srv/%2e%2e/etc/passwd",
     {"uri": "FILE:///srv/%2e%2e/etc/passwd", "path": "/srv/../etc/passwd"}, ["path"]),
    # Another host's file: the whole URI is the path, which no sandbox root contains.
    ("file://evil.example/etc/passwd",
     {"uri": "file://evil.example/etc/passwd", "path": "file://evil.example/etc/passwd"},
     ["path"]),
])
def test_a_reads_decision_arguments(uri: str, args: dict, path_args: list[str]) -> None:
    assert mapping.resource_read(uri) == (args, path_args)


def test_a_reads_path_argument_joins_the_entrys_own() -> None:
    config = ServerConfig(command=["x"], tools={"resources:read": {"path_args": ["path"]}})
    body = mapping.authorize_body(plan_id="p", name="s.resources:read", server=config,
                                  tool="resources:read", args={"uri": "file:///a", "path": "/a"},
                                  claim_=None, path_args=["path"])
    assert body["tool"]["path_args"] == ["path"]


ARGS = {"key": "k", "text": "t"}


def test_a_confirmation_state_is_spent_by_its_first_use() -> None:
    states = server._States()
    state = states.issue("rec.write_note", ARGS, "d-1")
    assert states.spend(state, "rec.write_note", dict(ARGS)) == "d-1"
    assert states.spend(state, "rec.write_note", dict(ARGS)) is None  # replayed


def test_a_confirmation_state_answers_its_own_call_only() -> None:
    states = server._States()
    state = states.issue("rec.write_note", ARGS, "d-1")
    assert states.spend(state, "rec.write_note", {**ARGS, "text": "other"}) is None
    assert states.spend(state, "rec.read_note", ARGS) is None
    assert states.spend(state.replace("d-1", "d-2", 1), "rec.write_note", ARGS) is None
    assert server._States().spend(state, "rec.write_note", ARGS) is None  # not its key
    for forged in (None, "", "d-1", "d-1.x.y", state + "0"):
        assert states.spend(forged, "rec.write_note", ARGS) is None
    assert states.spend(state, "rec.write_note", ARGS) == "d-1"  # still unspent until here


def test_a_confirmation_state_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    states = server._States()
    now = 1_900_000_000.0
    monkeypatch.setattr(server.time, "time", lambda: now)
    state = states.issue("rec.write_note", ARGS, "d-1")
    monkeypatch.setattr(server.time, "time", lambda: now + server.STATE_SECONDS + 1)
    assert states.spend(state, "rec.write_note", ARGS) is None
