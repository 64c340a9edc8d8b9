// The `ts` blocks of README.md and of docs/client.md's TypeScript section run, in order, as
// one ES module each, against the service named by TOOLGATE_TS_TEST_URL (the docs' address
// becomes its), with TOOLGATE_TOKEN its key: the examples are what a reader would run.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { test } from "node:test";

const URL_ = process.env.TOOLGATE_TS_TEST_URL;
const skip = URL_ ? false : "TOOLGATE_TS_TEST_URL is not set (no service to run them against)";
if (!URL_ && process.env.TOOLGATE_TS_REQUIRE_LIVE === "1") {
  throw new Error("TOOLGATE_TS_REQUIRE_LIVE=1 but TOOLGATE_TS_TEST_URL is unset");
}

function blocks(path) {
  const text = readFileSync(new URL(path, import.meta.url), "utf8");
  return [...text.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

function runs(name, code) {
  // Inside the package, so `import ... from "toolgate-client"` is the package itself.
  const file = new URL(`../.${name}.tmp.mjs`, import.meta.url);
  writeFileSync(file, code.replaceAll("http://127.0.0.1:8000", URL_));
  try {
    const result = spawnSync(process.execPath, [file.pathname], { encoding: "utf8",
      timeout: 120_000, env: { ...process.env, TOOLGATE_TOKEN: process.env.TOOLGATE_TS_TEST_TOKEN } });
    assert.equal(result.status, 0, `${name} failed:\n${result.stdout}\n${result.stderr}`);
    return result.stdout;
  } finally {
    rmSync(file, { force: true });
  }
}

test("README.md's examples run", { skip }, () => {
  const code = blocks("../README.md");
  assert.ok(code.length >= 4);
  const out = runs("readme", code.join("\n"));
  assert.match(out, /^5$/m); // the guarded function's answer
  assert.match(out, /^0\.005$/m); // its cost, in the plan's ledger
});

test("docs/client.md's TypeScript examples run", { skip }, () => {
  const code = blocks("../../../docs/client.md");
  assert.ok(code.length >= 1);
  runs("client-md", code.join("\n"));
});
