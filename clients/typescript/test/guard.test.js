// guard(tool, fn): enforce first, run only when allowed, report the outcome.
import assert from "node:assert/strict";
import { test } from "node:test";

import * as tg from "../dist/index.js";
import { ALLOW, deny, json, scripted } from "./fake.js";

function client(answers) {
  const fake = scripted(answers);
  const c = new tg.Client("http://toolgate.test", { fetch: fake.fetch, retries: 0 });
  return { client: c, calls: fake.calls };
}
const paths = (calls) => calls.map((call) => call.url.replace("http://toolgate.test", ""));

test("an allowed call runs and its outcome is reported with the cost", async () => {
  const { client: c, calls } = client([json(200, ALLOW), json(200, { status: "succeeded" })]);
  const ran = [];
  const write = c.guard((path) => ({ name: "fs.write", args: { path } }),
    async (path, text) => { ran.push([path, text]); return { bytes: text.length }; },
    { planId: "p-1", context: (path) => ({ sandbox_root: "/sb", confirmed: path.endsWith(".txt") }),
      cost: (result) => result.bytes / 100 });
  assert.deepEqual(await write("/sb/a.txt", "hello"), { bytes: 5 });
  assert.deepEqual(ran, [["/sb/a.txt", "hello"]]);
  assert.deepEqual(paths(calls), ["/v1/authorize-tool", "/v1/decisions/d-1/outcome"]);
  assert.deepEqual(calls[0].body, { tool: { name: "fs.write", args: { path: "/sb/a.txt" } },
    context: { sandbox_root: "/sb", confirmed: true }, plan_id: "p-1" });
  assert.deepEqual(calls[1].body, { status: "succeeded", cost: 0.05 });
});

test("a denied call does not run, reports nothing and throws the deny's class", async () => {
  const { client: c, calls } = client([json(200, deny("ToolSafetyViolationError", "unsafe_tool"))]);
  let ran = false;
  const shell = c.guard({ name: "shell.exec" }, () => { ran = true; });
  await assert.rejects(shell(), tg.ToolSafetyViolationError);
  assert.equal(ran, false);
  assert.deepEqual(paths(calls), ["/v1/authorize-tool"]);
});

test("toolgate unavailable: the function does not run", async () => {
  const { client: c } = client([new TypeError("fetch failed")]);
  let ran = false;
  const shell = c.guard({ name: "shell.exec" }, () => { ran = true; });
  await assert.rejects(shell(), tg.ToolgateUnavailableError);
  assert.equal(ran, false);
});

test("a failing function is reported execution_failed; ToolExecutionError has its cause", async () => {
  const { client: c, calls } = client([json(200, ALLOW), json(200, { status: "execution_failed" })]);
  const boom = new Error("disk full");
  const write = c.guard({ name: "fs.write" }, () => { throw boom; });
  await assert.rejects(write(), (err) => {
    assert.ok(err instanceof tg.ToolExecutionError);
    assert.deepEqual([err.code, err.decisionId, err.cause], ["execution_failed", "d-1", boom]);
    return true;
  });
  assert.deepEqual(calls[1].body, { status: "execution_failed", error: "Error: disk full" });
});

test("report: false runs the function without reporting", async () => {
  const { client: c, calls } = client([json(200, ALLOW)]);
  const read = c.guard({ name: "fs.read" }, (x) => x * 2, { report: false });
  assert.equal(await read(21), 42);
  assert.equal(calls.length, 1);
});

test("enforce waits for a pending approval and asks again once it is granted", async () => {
  const pending = deny("ToolHumanApprovalRequiredError", "human_approval_required",
    { details: { approval: { approval_id: "ap-1", state: "pending" } } });
  const { client: c, calls } = client([json(200, pending),
    json(200, { approval_id: "ap-1", state: "pending" }),
    json(200, { approval_id: "ap-1", state: "granted" }), json(200, ALLOW)]);
  const decision = await c.enforce({ planId: "p-1", tool: { name: "deploy" }, waitForApproval: 30 });
  assert.equal(decision.allowed, true);
  assert.deepEqual(paths(calls), ["/v1/authorize-tool", "/v1/approvals/ap-1?wait=30",
    "/v1/approvals/ap-1?wait=30", "/v1/authorize-tool"]);
});

test("a rejected approval throws the deny with the approval as last read", async () => {
  const pending = deny("ToolHumanApprovalRequiredError", "human_approval_required",
    { details: { approval: { approval_id: "ap-1", state: "pending" } } });
  const rejected = { approval_id: "ap-1", state: "rejected", reason: "no" };
  const { client: c } = client([json(200, pending), json(200, rejected)]);
  await assert.rejects(c.enforce({ tool: { name: "deploy" }, waitForApproval: 5 }), (err) => {
    assert.ok(err instanceof tg.ToolHumanApprovalRequiredError);
    assert.deepEqual(err.approval, rejected);
    return true;
  });
});

test("waitForApproval returns the approval once it leaves pending", async () => {
  const { client: c, calls } = client([json(200, { approval_id: "ap-2", state: "pending" }),
    json(200, { approval_id: "ap-2", state: "granted" })]);
  assert.equal((await c.waitForApproval("ap-2", { timeout: 90 })).state, "granted");
  assert.deepEqual(paths(calls), ["/v1/approvals/ap-2?wait=60", "/v1/approvals/ap-2?wait=60"]);
});
