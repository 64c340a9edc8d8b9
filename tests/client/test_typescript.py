"""The TypeScript client (clients/typescript, npm package toolgate-client), from the service's
suite: its generated types are those of the app's OpenAPI document, and its node test suite
(unit tests, and the shared decision cases through the client) passes against a served
toolgate, on SQLite and on Postgres.

Needs Node 20+ and `npm ci` run in clients/typescript (`make test` does it). Missing, the tests
skip, unless CI is set (then they fail).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ADMIN_TOKEN
from tests.serving import serve, stop

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
BIN = PACKAGE / "node_modules" / ".bin"
GENERATED = PACKAGE / "src" / "openapi.ts"


def _require_node() -> str:
    node = shutil.which("node")
    missing = None
    if node is None:
        missing = "node is not installed"
    elif not (BIN / "tsc").exists() or not (BIN / "openapi-typescript").exists():
        missing = "clients/typescript/node_modules is missing (run `npm ci` there)"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{missing}; CI is set, so the TypeScript client must be tested")
        pytest.skip(missing)
    assert node is not None
    return node


def _run(args: list[str], env: dict[str, str] | None = None,
         timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=PACKAGE, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_generated_types_are_those_of_the_apps_openapi_document(tmp_path: Path) -> None:
    _require_node()
    document = tmp_path / "openapi.json"
    dumped = _run([sys.executable, "scripts/openapi.py"])
    assert dumped.returncode == 0, dumped.stderr
    document.write_text(dumped.stdout)
    out = tmp_path / "openapi.ts"
    generated = _run([str(BIN / "openapi-typescript"), str(document),
                      "--default-non-nullable", "false", "-o", str(out)])
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert out.read_text() == GENERATED.read_text(), (
        "clients/typescript/src/openapi.ts is not generated from the app's current OpenAPI "
        "document: run `npm run generate` in clients/typescript and commit the result")


@pytest.mark.slow
def test_the_typescript_suite_passes_against_a_served_toolgate(database_url: str,
                                                              tmp_path: Path) -> None:
    node = _require_node()
    built = _run([str(BIN / "tsc"), "-p", "tsconfig.json"])
    assert built.returncode == 0, built.stdout + built.stderr
    proc, url = serve({"TOOLGATE_DATABASE_URL": database_url,
                       "TOOLGATE_ADMIN_TOKEN": ADMIN_TOKEN}, tmp_path / "server.log")
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
        env.update(TOOLGATE_TS_TEST_URL=url, TOOLGATE_TS_TEST_TOKEN=ADMIN_TOKEN,
                   TOOLGATE_TS_REQUIRE_LIVE="1")
        tests = sorted(str(p.relative_to(PACKAGE)) for p in (PACKAGE / "test").glob("*.test.js"))
        result = _run([node, "--test", *tests], env=env)
    finally:
        stop(proc)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-6000:]
    counts = {k: int(v) for k, v in re.findall(r"^# (pass|fail|skipped|cancelled) (\d+)$",
                                                 result.stdout, flags=re.M)}
    assert counts["fail"] == counts["skipped"] == counts["cancelled"] == 0, report[-3000:]
    assert counts["pass"] >= 38, report[-3000:]
