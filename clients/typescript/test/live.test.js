// Against a running toolgate: the shared decision cases (tests/cases/*.json, the corpus of
// the core, HTTP and Python-client runners, with the same expectations), the classes
// against GET /v1/errors, and a guarded tool with its outcome.
//
// TOOLGATE_TS_TEST_URL names the service, TOOLGATE_TS_TEST_TOKEN its admin key; the
// service's suite (tests/client/test_typescript.py) starts one and sets both. Unset, these
// tests skip, unless TOOLGATE_TS_REQUIRE_LIVE=1 makes that a failure.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";

import * as tg from "../dist/index.js";

const URL_ = process.env.TOOLGATE_TS_TEST_URL;
const TOKEN = process.env.TOOLGATE_TS_TEST_TOKEN;
const REQUIRE = process.env.TOOLGATE_TS_REQUIRE_LIVE === "1";
const skip = URL_ ? false : "TOOLGATE_TS_TEST_URL is not set (no service to test against)";
if (!URL_ && REQUIRE) throw new Error("TOOLGATE_TS_REQUIRE_LIVE=1 but TOOLGATE_TS_TEST_URL is unset");

const CASES_DIR = new URL("../../../tests/cases/", import.meta.url);
const BATCH = 100; // the service's batch limit

/** (id, case) pairs of every decision case, as tests/casefiles.py's load_cases("decision"). */
function decisionCases() {
  const cases = [];
  for (const file of readdirSync(CASES_DIR).filter((f) => f.endsWith(".json")).sort()) {
    if (file === "invalid.json") continue;
    for (const c of JSON.parse(readFileSync(new URL(file, CASES_DIR), "utf8"))) {
      cases.push([`${file.slice(0, -5)}/${c.name}`, c]);
    }
  }
  return cases;
}

/** What differs from the case's expectations (the Python client runner's checks). */
function problems(c, decision, explained) {
  const expect = c.expect;
  const deny = decision.deny;
  const found = [];
  const got = { allowed: decision.allowed, code: deny?.code ?? null, error: deny?.error ?? null,
    check: deny?.check ?? null };
  for (const [key, value] of Object.entries(got)) {
    if (expect[key] !== value) found.push(`${key}: wanted ${expect[key]}, got ${value}`);
  }
  if ("message" in expect && (deny?.message ?? null) !== expect.message) {
    found.push(`message: wanted ${expect.message}, got ${deny?.message}`);
  }
  for (const [key, value] of Object.entries(expect.details ?? {})) {
    try {
      assert.deepStrictEqual(deny?.details?.[key], value);
    } catch {
      found.push(`details.${key}: wanted ${JSON.stringify(value)}, got ${JSON.stringify(deny?.details)}`);
    }
  }
  if (explained) {
    const outcomes = Object.fromEntries((decision.checks ?? []).map((k) => [k.check, k.outcome]));
    for (const [check, outcome] of Object.entries(expect.outcomes ?? {})) {
      if (outcomes[check] !== outcome) found.push(`outcome of ${check}: wanted ${outcome}`);
    }
  }
  if (!decision.decisionId) found.push("no decisionId");
  if (!deny) {
    if (decision.raiseForDeny() !== decision) found.push("raiseForDeny() did not return it");
    return found;
  }
  if (JSON.stringify(deny.hierarchy) !== JSON.stringify(tg.hierarchyOf(deny.error))) {
    found.push(`hierarchy ${deny.hierarchy} is not the client's ${tg.hierarchyOf(deny.error)}`);
  }
  const wanted = tg[expect.error];
  if (!(typeof wanted === "function" && wanted.prototype instanceof tg.ToolgateDeny)) {
    return [...found, `toolgate-client has no deny class ${expect.error}`];
  }
  try {
    decision.raiseForDeny();
    found.push("raiseForDeny() did not throw");
  } catch (err) {
    if (Object.getPrototypeOf(err) !== wanted.prototype) {
      found.push(`raiseForDeny() threw ${err.name}, not ${expect.error}`);
    }
    if (err.code !== deny.code || err.check !== deny.check || err.decisionId !== decision.decisionId) {
      found.push(`the error carries ${[err.code, err.check, err.decisionId]}`);
    }
  }
  return found;
}

const admin = () => new tg.Client(URL_, { token: TOKEN, timeout: 10 });

test("every decision case passes through the client, one by one and in batches", { skip },
  async () => {
    const client = admin();
    const cases = decisionCases();
    assert.ok(cases.length >= 120, `only ${cases.length} cases`);
    const failures = [];
    for (const [id, c] of cases) {
      const explain = "outcomes" in c.expect;
      const r = c.request;
      const decision = await client.authorizeTool({ tool: r.tool, context: r.context,
        safetyProfile: r.safety_profile, layer: r.layer, explain });
      failures.push(...problems(c, decision, explain).map((p) => `${id}: ${p}`));
      if (!decision.allowed) {
        await assert.rejects(client.enforce({ tool: r.tool, context: r.context,
          safetyProfile: r.safety_profile, layer: r.layer }), decision.deny.exceptionClass);
      }
    }
    for (let start = 0; start < cases.length; start += BATCH) {
      const chunk = cases.slice(start, start + BATCH);
      const decisions = await client.authorizeTools(chunk.map(([, c]) => c.request));
      assert.equal(decisions.length, chunk.length);
      chunk.forEach(([id, c], i) => failures.push(
        ...problems(c, decisions[i], false).map((p) => `${id} (batch): ${p}`)));
    }
    assert.deepEqual(failures, []);
  });

test("the client's classes are the service's (GET /v1/errors)", { skip }, async () => {
  const { errors } = await admin().errors();
  assert.deepEqual(Object.keys(tg.CODES).sort(), errors.map((e) => e.error).sort());
  for (const e of errors) {
    assert.equal(tg.PARENTS[e.error], e.parent);
    assert.deepEqual(tg.hierarchyOf(e.error), e.hierarchy);
    assert.deepEqual([...tg.CODES[e.error]], e.codes);
  }
});

test("a plan, a guarded tool that runs and reports, one that is denied", { skip }, async () => {
  const client = admin();
  const tag = `ts-${Date.now()}-${Math.floor(Math.random() * 1e6)}`;
  await client.request("PUT", `/v1/profiles/${tag}`, { json: { safety: {
    require_sandbox: true, allow_unsafe_tools: false } } });
  await client.request("PUT", `/v1/actions/${tag}`, { json: { project: tag, read_only: false,
    automation_profile: tag } });
  const plan = await client.createPlan({ actionId: tag, planId: `${tag}-plan` });
  assert.equal(plan.plan_id, `${tag}-plan`);
  const ran = [];
  const search = client.guard((q) => ({ name: "web.search", args: { q },
    capability: { writes: false, checkpointable: true, unsafe: false } }),
  (q) => { ran.push(q); return { hits: 3 }; }, { planId: plan.plan_id, cost: () => 0.25 });
  assert.deepEqual(await search("toolgate"), { hits: 3 });
  const shell = client.guard({ name: "sh", capability: { writes: true, checkpointable: true,
    unsafe: true } }, () => ran.push("shell"), { planId: plan.plan_id,
    context: { sandbox_id: "sb-1" } });
  await assert.rejects(shell(), (err) => err instanceof tg.ToolSafetyViolationError
    && err.code === "unsafe_tool" && typeof err.decisionId === "string");
  assert.deepEqual(ran, ["toolgate"]);
  const { items: records } = await client.request("GET", "/v1/decisions",
    { params: { plan_id: plan.plan_id } });
  const items = records.filter((d) => d.kind === "authorize");
  assert.deepEqual(items.map((d) => [d.tool, d.allowed]), [["sh", false], ["web.search", true]]);
  const allowed = items.find((d) => d.allowed);
  const record = await client.request("GET", `/v1/decisions/${allowed.decision_id}`);
  assert.equal(record.outcome.status, "succeeded");
  assert.equal(record.outcome.cost, 0.25);
  assert.equal((await client.getPlan(plan.plan_id)).ledger.spent, 0.25);
});

test("a key that is not valid is a request error (401), not a deny", { skip }, async () => {
  const client = new tg.Client(URL_, { token: "tg_not_a_key", retries: 0 });
  await assert.rejects(client.enforce({ tool: { name: "fs.read" } }),
    (err) => err instanceof tg.ToolgateRequestError && err.status === 401);
});
