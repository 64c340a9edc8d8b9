// SPEC §19, last item, on a real socket: a fake toolgate on 127.0.0.1 answers exact bytes
// (duplicate keys, a missing or empty decision_id, a non-boolean `allowed`) or drips its
// answer one byte every 2 s; each is ToolgateUnavailableError, the drip well before its end.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, test } from "node:test";

import * as tg from "../dist/index.js";

const DENY = '{"error": "ToolAccessDeniedError", "code": "tool_not_allowed", "message": "no"}';
const MALFORMED = {
  "duplicate allowed, last true":
    `{"decision_id": "d-1", "allowed": false, "deny": ${DENY}, "allowed": true, "deny": null}`,
  "duplicate key nested":
    '{"decision_id": "d-1", "allowed": true, "deny": null, "profile": {"name": "a", "name": "b"}}',
  "duplicate escaped keys":
    `{"decision_id": "d-1", "allowed": false, "deny": ${DENY}, "\\u0061llowed": true, "d\\u0065ny": null}`,
  "no decision_id": '{"allowed": true, "deny": null}',
  "empty decision_id": '{"decision_id": "", "allowed": true, "deny": null}',
  "allowed a string": '{"decision_id": "d-1", "allowed": "true", "deny": null}',
  "allowed a number": '{"decision_id": "d-1", "allowed": 1, "deny": null}',
};
const TOOL = { name: "fs.read" };
const DRIP_BYTES = 40; // one every 2 s: 80 s in all
const WELL_BEFORE_MS = 30_000; // the deadline is 3 s; generous on a loaded machine

let server;
let url;
let answer = "{}";
const drips = new Set();

before(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (answer !== "drip") {
        res.writeHead(200, { "content-type": "application/json" }).end(answer);
        return;
      }
      res.writeHead(200, { "content-type": "application/json", "content-length": DRIP_BYTES });
      let sent = 0;
      const timer = setInterval(() => {
        res.write(sent === 0 ? "{" : " ");
        if (++sent === DRIP_BYTES) { clearInterval(timer); res.end(); }
      }, 2000);
      drips.add(timer);
      res.on("close", () => clearInterval(timer));
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${server.address().port}`;
});

after(() => {
  for (const timer of drips) clearInterval(timer);
  server.closeAllConnections();
  server.close();
});

for (const [name, body] of Object.entries(MALFORMED)) {
  test(`an answer with ${name} is no decision`, async () => {
    answer = body;
    const c = new tg.Client(url, { token: "t", timeout: 3, retries: 0 });
    await assert.rejects(c.enforce({ planId: "p-1", tool: TOOL }), tg.ToolgateUnavailableError);
    await assert.rejects(c.authorizeTool({ planId: "p-1", tool: TOOL }),
      tg.ToolgateUnavailableError);
  });
}

test("duplicateKey finds repeats at any depth and only keys", () => {
  const { duplicateKey } = tg;
  assert.equal(duplicateKey('{"a": 1, "b": {"c": 1, "c": 2}}'), "c");
  assert.equal(duplicateKey('{"a": ["a", "a"], "b": "a", "c": {"a": 1}}'), null);
  assert.equal(duplicateKey('[{"a": 1}, {"a": 2}]'), null);
  assert.equal(duplicateKey('{"a\\"": 1, "a\\u0022": 2}'), 'a"');
});

test("a strict allow is still an allow", async () => {
  answer = '{"decision_id": "d-1", "allowed": true, "deny": null}';
  const c = new tg.Client(url, { token: "t", timeout: 3, retries: 0 });
  assert.equal((await c.enforce({ planId: "p-1", tool: TOOL })).decisionId, "d-1");
});

test("an answer that drips a byte every 2 s fails at the deadline", async () => {
  answer = "drip";
  const c = new tg.Client(url, { token: "t", timeout: 3, retries: 0 });
  const started = Date.now();
  await assert.rejects(c.authorizeTool({ planId: "p-1", tool: TOOL }), (err) => {
    assert.ok(err instanceof tg.ToolgateUnavailableError);
    assert.match(err.message, /TimeoutError/);
    return true;
  });
  assert.ok(Date.now() - started < WELL_BEFORE_MS, `${Date.now() - started} ms`);
});
