// The client on a scripted fetch: requests, decisions, denies, failing closed.
import assert from "node:assert/strict";
import { test } from "node:test";

import * as tg from "../dist/index.js";
import { ALLOW, deny, json, scripted } from "./fake.js";

function client(answers, options = {}) {
  const fake = scripted(answers);
  const c = new tg.Client("http://toolgate.test/", { token: "tg_k", fetch: fake.fetch, ...options });
  return { client: c, calls: fake.calls };
}

const TOOL = { name: "fs.write", args: { path: "/sandbox/a" } };
const CTX = { sandbox_id: "sb-1", confirmed: true };

test("defaults are the Python client's: 2 s per attempt, 2 retries, 0.05 s backoff", () => {
  const c = new tg.Client("http://x", { fetch: async () => new Response("{}") });
  assert.deepEqual([c.timeout, c.retries, c.backoff], [2, 2, 0.05]);
  assert.equal(c.baseUrl, "http://x");
  assert.throws(() => new tg.Client("ftp://x"), TypeError);
  assert.throws(() => new tg.Client("http://x", { retries: -1 }), RangeError);
  assert.throws(() => new tg.Client("http://x", { timeout: 0 }), RangeError);
  assert.ok(!String(new tg.Client("http://x", { token: "secret" })).includes("secret"));
});

test("authorizeTool sends the wire body as is, with the key and a request id", async () => {
  const { client: c, calls } = client([json(200, ALLOW)]);
  const decision = await c.authorizeTool({ planId: "p-1", tool: TOOL, context: CTX,
    explain: true, layer: "runtime" });
  assert.equal(calls.length, 1);
  const [call] = calls;
  assert.equal(call.url, "http://toolgate.test/v1/authorize-tool");
  assert.equal(call.method, "POST");
  assert.deepEqual(call.body, { tool: TOOL, context: CTX, plan_id: "p-1", layer: "runtime",
    explain: true });
  assert.equal(call.headers.Authorization, "Bearer tg_k");
  assert.equal(call.headers["Content-Type"], "application/json");
  assert.match(call.headers["X-Request-ID"], /^[0-9a-f]{32}$/);
  assert.deepEqual([decision.allowed, decision.deny, decision.decisionId, decision.planId],
    [true, null, "d-1", "p-1"]);
  assert.equal(decision.requestId, call.headers["X-Request-ID"]);
  assert.deepEqual(decision.raw, ALLOW);
});

test("a deny is returned by authorizeTool and thrown, as its exact class, by enforce", async () => {
  const answer = deny("ToolSandboxRequiredError", "sandbox_required",
    { hierarchy: ["ToolRuntimeError", "ToolSandboxRequiredError"], details: { k: "v" } });
  const { client: c } = client([json(200, answer), json(200, answer)]);
  const decision = await c.authorizeTool({ tool: TOOL });
  assert.equal(decision.allowed, false);
  assert.equal(decision.deny.code, "sandbox_required");
  await assert.rejects(c.enforce({ tool: TOOL }), (err) => {
    assert.equal(Object.getPrototypeOf(err), tg.ToolSandboxRequiredError.prototype);
    assert.ok(err instanceof tg.ToolRuntimeError && err instanceof tg.ToolgateDeny);
    assert.deepEqual([err.code, err.message, err.decisionId, err.details, err.check],
      ["sandbox_required", "denied sandbox_required", "d-2", { k: "v" }, "sandbox"]);
    assert.equal(err.decision.deny.error, "ToolSandboxRequiredError");
    return true;
  });
});

test("enforce returns the allowed decision", async () => {
  const { client: c } = client([json(200, ALLOW)]);
  assert.equal((await c.enforce({ tool: TOOL })).decisionId, "d-1");
});

test("a deny naming an unknown class throws its nearest known ancestor", async () => {
  const answer = deny("ToolBrandNewError", "brand_new",
    { hierarchy: ["ToolRuntimeError", "ToolCostLimitExceededError", "ToolBrandNewError"] });
  const { client: c } = client([json(200, answer)]);
  await assert.rejects(c.enforce({ tool: TOOL }), (err) => {
    assert.equal(Object.getPrototypeOf(err), tg.ToolCostLimitExceededError.prototype);
    assert.equal(err.error, "ToolBrandNewError");
    return true;
  });
});

for (const [what, body] of [
  ["allowed as a string", { ...ALLOW, allowed: "true" }],
  ["allowed missing", { decision_id: "d" }],
  ["a deny without a reason", { ...ALLOW, allowed: false }],
  ["an allow with a deny", { ...ALLOW, deny: deny("X", "x").deny }],
  ["a list", [ALLOW]],
  ["deny.error empty", { ...deny("", "x") }],
]) {
  test(`an answer that is not a decision (${what}) is unavailable, never an allow`, async () => {
    const { client: c } = client([json(200, body)]);
    await assert.rejects(c.enforce({ tool: TOOL }), (err) => {
      assert.ok(err instanceof tg.ToolgateUnavailableError, String(err));
      assert.equal(err.code, "invalid_decision");
      return true;
    });
  });
}

test("a body that is not JSON is unavailable", async () => {
  const { client: c } = client([{ status: 200, body: "<html>", headers: {} }]);
  await assert.rejects(c.enforce({ tool: TOOL }), tg.ToolgateUnavailableError);
});

test("502/503/504 are retried with the same request id, then unavailable", async () => {
  const down = json(503, { error: { code: "storage_unavailable", message: "db", details: {} } });
  const { client: c, calls } = client([down, down, down]);
  const sleeps = [];
  c["http"].sleep = async (s) => { sleeps.push(s); };
  await assert.rejects(c.enforce({ tool: TOOL }), (err) => {
    assert.ok(err instanceof tg.ToolgateUnavailableError);
    assert.deepEqual([err.status, err.code], [503, "storage_unavailable"]);
    assert.match(err.message, /HTTP 503: db/);
    return true;
  });
  assert.equal(calls.length, 3);
  assert.equal(new Set(calls.map((call) => call.headers["X-Request-ID"])).size, 1);
  assert.equal(sleeps.length, 2);
  assert.ok(sleeps[0] >= 0.025 && sleeps[0] <= 0.05 && sleeps[1] >= 0.05 && sleeps[1] <= 0.1);
});

test("a retry that succeeds gives the decision", async () => {
  const { client: c, calls } = client([new TypeError("fetch failed"), json(502, {}), json(200, ALLOW)]);
  c["http"].sleep = async () => {};
  assert.equal((await c.enforce({ tool: TOOL })).allowed, true);
  assert.equal(calls.length, 3);
});

test("500 is not retried; 4xx is a request error, never retried", async () => {
  const { client: c, calls } = client([json(500, {}),
    json(422, { error: { code: "invalid_input", message: "bad", details: { fields: ["tool"] } } }),
    json(409, { error: { code: "plan_read_only", message: "ro", details: { decision_id: "d-7" } } }),
    json(404, { detail: "Not Found" })]);
  await assert.rejects(c.enforce({ tool: TOOL }),
    (err) => err instanceof tg.ToolgateUnavailableError && err.status === 500);
  await assert.rejects(c.enforce({ tool: TOOL }), (err) => {
    assert.ok(err instanceof tg.ToolgateRequestError);
    assert.deepEqual([err.status, err.code, err.message, err.details],
      [422, "invalid_input", "bad", { fields: ["tool"] }]);
    return true;
  });
  await assert.rejects(c.request("POST", "/v1/plans/p/execute"), (err) => {
    assert.ok(err instanceof tg.PlanReadOnlyError);
    assert.deepEqual([err.status, err.code, err.decisionId], [409, "plan_read_only", "d-7"]);
    return true;
  });
  await assert.rejects(c.request("GET", "/nope"),
    (err) => err instanceof tg.ToolgateRequestError && err.code === "http_404"
      && err.message === "Not Found");
  assert.equal(calls.length, 4);
});

test("a redirect is not followed: unavailable", async () => {
  const { client: c, calls } = client([json(307, {}, { location: "http://elsewhere/" })]);
  await assert.rejects(c.enforce({ tool: TOOL }), tg.ToolgateUnavailableError);
  assert.equal(calls.length, 1);
});

test("each attempt has the timeout; a hung service is unavailable after the retries", async () => {
  const hang = (call) => new Promise((_resolve, reject) => {
    call.signal.addEventListener("abort", () => reject(call.signal.reason));
  });
  const { client: c, calls } = client([hang, hang], { timeout: 0.05, retries: 1, backoff: 0 });
  await assert.rejects(c.enforce({ tool: TOOL }), (err) => {
    assert.ok(err instanceof tg.ToolgateUnavailableError);
    assert.match(err.message, /unreachable after 2 attempt\(s\): TimeoutError/);
    assert.equal(err.status, null);
    return true;
  });
  assert.equal(calls.length, 2);
});

test("a closed port is unavailable (the real fetch)", async () => {
  const c = new tg.Client("http://127.0.0.1:9", { retries: 1, backoff: 0 });
  await assert.rejects(c.enforce({ tool: TOOL }), (err) => {
    assert.ok(err instanceof tg.ToolgateUnavailableError && !(err instanceof tg.ToolgateDeny));
    assert.match(err.message, /unreachable after 2 attempt/);
    return true;
  });
});

test("NaN and Infinity are refused before anything is sent", async () => {
  const { client: c, calls } = client([json(200, ALLOW)]);
  await assert.rejects(c.enforce({ tool: TOOL, context: { accumulated_cost: NaN } }), RangeError);
  assert.equal(calls.length, 0);
});

test("createPlan, reportOutcome and the small calls send the wire's names", async () => {
  const { client: c, calls } = client([json(201, { plan_id: "p-9" }), json(200, { status: "succeeded" }),
    json(200, { rejected: false }), json(200, { errors: [] }), json(200, { plan_id: "p/1" })]);
  await c.createPlan({ actionId: "explore", planId: "p-9", automationProfile: "strict" });
  await c.reportOutcome("d-1", { cost: 0.5, verified: true, argsSha256: "ab" });
  await c.screen({ text: "rm -rf /", skill: "shell" });
  await c.errors();
  await c.getPlan("p/1");
  assert.deepEqual(calls.map((call) => [call.method, call.url.replace("http://toolgate.test", ""),
    call.body]), [
    ["POST", "/v1/plans", { action_id: "explore", plan_id: "p-9", automation_profile: "strict" }],
    ["POST", "/v1/decisions/d-1/outcome",
      { status: "succeeded", cost: 0.5, verified: true, args_sha256: "ab" }],
    ["POST", "/v1/screen", { text: "rm -rf /", skill: "shell" }],
    ["GET", "/v1/errors", undefined],
    ["GET", "/v1/plans/p%2F1", undefined],
  ]);
  await assert.rejects(c.getPlan(""), TypeError);
});
