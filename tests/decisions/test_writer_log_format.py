"""The decision log writer's own lines follow TOOLGATE_LOG_FORMAT (SPEC §13), on SQLite and
Postgres: under `json`, every line the writer process logs is a JSON object, like the
server's."""

from __future__ import annotations

import httpx
import orjson

from tests.serving import serve, stop

TOKEN = "writer-log-admin-token"


def test_the_writers_lines_are_json(database_url, tmp_path):
    log = tmp_path / "server.log"
    proc, url = serve({"TOOLGATE_DATABASE_URL": database_url, "TOOLGATE_ADMIN_TOKEN": TOKEN,
                       "TOOLGATE_LOG_FORMAT": "json", "TOOLGATE_LOG_LEVEL": "info"}, log)
    try:
        with httpx.Client(base_url=url, timeout=30,
                          headers={"Authorization": f"Bearer {TOKEN}"}) as c:
            r = c.post("/v1/authorize-tool", json={"tool": {"name": "t", "capability": {
                "writes": False, "checkpointable": True, "unsafe": False}}})
            assert r.status_code == 200, r.text
    finally:
        stop(proc)  # the writer logs its totals as it stops
    lines = [line for line in log.read_text().splitlines() if "decisions.writer" in line]
    assert lines, log.read_text()
    for line in lines:
        record = orjson.loads(line)
        assert record["logger"].startswith("toolgate.decisions.writer")
        assert record["level"] and record["message"]
