// The client's classes against the service's table: the snapshot of GET /v1/errors that
// the service's suite holds in step with app/policy/denies.py (as the Python client does).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import * as tg from "../dist/index.js";

const DOCUMENT = JSON.parse(readFileSync(
  new URL("../../python/tests/errors_document.json", import.meta.url), "utf8"));

test("every class of GET /v1/errors is exported with its name, parent chain and codes", () => {
  const names = DOCUMENT.errors.map((e) => e.error);
  assert.deepEqual(Object.keys(tg.CODES).sort(), [...names].sort());
  for (const entry of DOCUMENT.errors) {
    const cls = tg[entry.error];
    assert.equal(typeof cls, "function", `${entry.error} is not exported`);
    assert.equal(tg.errorClassFor(entry.error), cls);
    assert.equal(cls.prototype.name, entry.error);
    const parent = Object.getPrototypeOf(cls);
    assert.equal(parent, entry.parent === null ? tg.ToolgateDeny : tg[entry.parent], entry.error);
    assert.equal(tg.PARENTS[entry.error], entry.parent);
    assert.deepEqual(tg.hierarchyOf(entry.error), entry.hierarchy);
    assert.deepEqual([...tg.CODES[entry.error]], entry.codes);
    const exc = new cls("m", { decisionId: "d-9", details: { a: 1 } });
    assert.ok(exc instanceof tg.ToolgateDeny && exc instanceof Error);
    assert.ok(!(exc instanceof tg.ToolgateError));
    assert.equal(exc.name, entry.error);
    assert.equal(exc.code, entry.codes[0] ?? null);
    assert.deepEqual([exc.message, exc.decisionId, exc.details], ["m", "d-9", { a: 1 }]);
  }
});

test("unavailable and request errors are no denies, and carry the same fields", () => {
  for (const cls of [tg.ToolgateUnavailableError, tg.ToolgateRequestError]) {
    const exc = new cls("m", { status: 503, code: "c", details: { x: 1 }, requestId: "r" });
    assert.ok(exc instanceof tg.ToolgateError && !(exc instanceof tg.ToolgateDeny));
    assert.equal(exc.name, cls.name);
    assert.deepEqual([exc.code, exc.message, exc.decisionId, exc.details, exc.status],
      ["c", "m", null, { x: 1 }, 503]);
  }
});

test("an unknown class fails closed to its nearest known ancestor, else ToolRuntimeError", () => {
  assert.equal(tg.resolveDenyClass("ToolNewError", ["ToolRuntimeError", "ToolSandboxRequiredError",
    "ToolNewError"]), tg.ToolSandboxRequiredError);
  assert.equal(tg.resolveDenyClass("Whatever", ["Else"]), tg.ToolRuntimeError);
  assert.equal(tg.resolveDenyClass(undefined), tg.ToolRuntimeError);
  assert.equal(tg.resolveDenyClass("constructor"), tg.ToolRuntimeError);
});

test("SkillExecutionError has errorType; ToolHumanApprovalRequiredError has approval", () => {
  assert.equal(new tg.SkillExecutionError("m").errorType, "PERMISSION_DENIED");
  const approval = { approval_id: "a-1", state: "pending" };
  assert.deepEqual(new tg.ToolHumanApprovalRequiredError("m", { details: { approval } }).approval,
    approval);
  assert.equal(new tg.ToolHumanApprovalRequiredError("m").approval, null);
});
