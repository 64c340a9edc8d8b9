"""Skills, POST /v1/screen and safety tests (SPEC §5, seed 003)."""

from __future__ import annotations

import orjson

SHELL = {"category": "ops", "unsafe_phrases": ["  RM -RF ", "delete all documents",
                                               "format the system", "rm -rf"]}


async def _shell(client):
    r = await client.put("/v1/skills/shell", json=SHELL)
    assert r.status_code == 201, r.text
    return r


async def test_skill_crud_normalises_phrases(client):
    body = (await _shell(client)).json()
    assert body["unsafe_phrases"] == ["rm -rf", "delete all documents", "format the system"]
    assert body["category"] == "ops" and body["warnings"] == []
    r = await client.put("/v1/skills/shell", json={"unsafe_phrases": ["drop table users"]})
    assert r.status_code == 200
    assert r.json()["unsafe_phrases"] == ["drop table users"] and r.json()["category"] is None
    assert (await client.get("/v1/skills/shell")).json()["unsafe_phrases"] == [
        "drop table users"]
    await client.put("/v1/skills/files", json={"unsafe_phrases": []})
    names = [s["name"] for s in (await client.get("/v1/skills")).json()["items"]]
    assert names == ["files", "shell"]
    assert (await client.delete("/v1/skills/shell")).status_code == 204
    assert (await client.get("/v1/skills/shell")).status_code == 404
    assert (await client.delete("/v1/skills/shell")).status_code == 404


async def test_skill_validation(client):
    cases = [
        ({}, {"unsafe_phrases"}),
        ({"unsafe_phrases": ["ok phrase", "   "]}, {"unsafe_phrases.1"}),
        ({"unsafe_phrases": ["x" * 201]}, {"unsafe_phrases.0"}),
        ({"unsafe_phrases": [1]}, {"unsafe_phrases.0"}),
        ({"unsafe_phrases": "rm -rf"}, {"unsafe_phrases"}),
        ({"unsafe_phrases": [], "extra": 1}, {"extra"}),
        ({"unsafe_phrases": [], "category": ""}, {"category"}),
    ]
    for body, expected in cases:
        r = await client.put("/v1/skills/s", json=body)
        assert r.status_code == 422, body
        assert {f["field"] for f in r.json()["error"]["details"]["fields"]} == expected, body
    assert (await client.get("/v1/skills/s")).status_code == 404


async def test_bare_common_words_are_warned_about(client):
    r = await client.put("/v1/skills/media", json={
        "unsafe_phrases": ["format", "delete", "rm", "format the system"]})
    assert r.status_code == 201
    warnings = r.json()["warnings"]
    # Each warning starts by naming its phrase.
    assert [w.split("'")[1] for w in warnings] == ["format", "delete", "rm"]
    # Stored all the same: a warning is advice, not a refusal.
    assert "format" in r.json()["unsafe_phrases"]


async def test_screen_rejects_case_variants(client):
    await _shell(client)
    for text, phrase in [("RM -RF /", "rm -rf"),
                         ("Delete All Documents now", "delete all documents")]:
        r = await client.post("/v1/screen", json={"skill": "shell", "text": text})
        assert r.status_code == 200
        body = r.json()
        assert body["rejected"] is True and body["matched_phrase"] == phrase
        assert body["skill"] == "shell"
        assert body["error"] == "UnsafeRequestRejectedError" and body["code"] == "unsafe_phrase"
        assert phrase in body["message"] and body["decision_id"]


async def test_screen_without_match(client):
    await _shell(client)
    r = await client.post("/v1/screen", json={"skill": "shell",
                                              "text": "convert clip.mp4 to another format"})
    body = r.json()
    assert r.status_code == 200
    assert body["rejected"] is False and body["matched_phrase"] is None
    assert body["error"] is None and body["code"] is None and body["skill"] == "shell"


async def test_screen_across_all_skills_names_the_skill(client):
    await _shell(client)
    await client.put("/v1/skills/db", json={"unsafe_phrases": ["drop database"]})
    r = await client.post("/v1/screen", json={"text": "then DROP DATABASE prod"})
    assert r.json()["rejected"] is True
    assert r.json()["skill"] == "db" and r.json()["matched_phrase"] == "drop database"
    r = await client.post("/v1/screen", json={"text": "list the files"})
    assert r.json()["rejected"] is False and r.json()["skill"] is None


async def test_screen_unknown_skill_and_bad_input(client):
    r = await client.post("/v1/screen", json={"skill": "ghost", "text": "rm -rf"})
    assert r.status_code == 404 and "ghost" in r.json()["error"]["message"]
    r = await client.post("/v1/screen", json={"text": 5})
    assert r.status_code == 422
    assert r.json()["error"]["details"]["fields"][0]["field"] == "text"
    r = await client.post("/v1/screen", json={"text": "x" * 100_001})
    assert r.status_code == 422
    r = await client.post("/v1/screen", json={"text": "x", "model": "y"})
    assert r.status_code == 422


async def test_safety_test_json_list(client):
    await _shell(client)
    r = await client.post("/v1/skills/shell/safety-test",
                          json=["rm -rf /", "Delete all documents in the share"])
    assert r.status_code == 200
    assert r.json() == {"skill": "shell", "total": 2, "rejected": 2, "missed": [], "ok": True}


async def test_safety_test_utterances_object(client):
    await _shell(client)
    r = await client.post("/v1/skills/shell/safety-test",
                          json={"utterances": ["RM -RF ~", "please wipe the disk"]})
    assert r.status_code == 200
    body = r.json()
    assert body["ok"] is False and body["total"] == 2 and body["rejected"] == 1
    assert body["missed"] == [{"line": 2, "text": "please wipe the disk"}]


async def test_safety_test_jsonl_reports_the_missed_line(client):
    await _shell(client)
    lines = [
        orjson.dumps("rm -rf /tmp/x").decode(),
        "",
        orjson.dumps({"text": "Format the system drive"}).decode(),
        orjson.dumps({"utterance": "erase everything", "expected": "reject"}).decode(),
        orjson.dumps("delete all documents").decode(),
    ]
    for content_type in ("application/x-ndjson", "text/plain; charset=utf-8"):
        r = await client.post("/v1/skills/shell/safety-test", content="\n".join(lines) + "\n",
                              headers={"content-type": content_type})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["total"] == 4 and body["rejected"] == 3 and body["ok"] is False
        assert body["missed"] == [{"line": 4, "text": "erase everything"}]


async def test_safety_test_bad_jsonl_line_is_422_naming_it(client):
    await _shell(client)
    content = '"rm -rf /"\n"ok"\n{not json}\n'
    r = await client.post("/v1/skills/shell/safety-test", content=content,
                          headers={"content-type": "application/x-ndjson"})
    assert r.status_code == 422
    error = r.json()["error"]
    assert "line 3" in error["message"]
    assert error["details"]["fields"][0]["field"] == "line 3"
    assert error["details"]["line"] == 3
    r = await client.post("/v1/skills/shell/safety-test", content='"a"\n42\n',
                          headers={"content-type": "application/x-ndjson"})
    assert r.status_code == 422 and "line 2" in r.json()["error"]["message"]
    r = await client.post("/v1/skills/shell/safety-test", content='{"label": "x"}\n',
                          headers={"content-type": "application/x-ndjson"})
    assert r.status_code == 422 and "line 1" in r.json()["error"]["message"]


async def test_safety_test_bad_bodies(client):
    await _shell(client)
    post = client.post
    r = await post("/v1/skills/shell/safety-test", json=[])
    assert r.status_code == 422 and "no utterances" in r.json()["error"]["message"]
    r = await post("/v1/skills/shell/safety-test", json=["ok", 3])
    assert r.status_code == 422
    assert r.json()["error"]["details"]["fields"][0]["field"] == "utterances.1"
    r = await post("/v1/skills/shell/safety-test", json={"utterances": ["a"], "x": 1})
    assert r.status_code == 422 and r.json()["error"]["details"]["fields"][0]["field"] == "x"
    r = await post("/v1/skills/shell/safety-test", content=b"[NaN]",
                   headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_json"
    r = await post("/v1/skills/shell/safety-test", content=b'"\xff"',
                   headers={"content-type": "application/x-ndjson"})
    assert r.status_code == 422
    r = await post("/v1/skills/ghost/safety-test", json=["rm -rf"])
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


async def test_safety_test_is_documented_in_openapi(client):
    spec = (await client.get("/openapi.json")).json()
    content = spec["paths"]["/v1/skills/{name}/safety-test"]["post"]["requestBody"]["content"]
    assert {"application/json", "application/x-ndjson", "text/plain"} <= set(content)
