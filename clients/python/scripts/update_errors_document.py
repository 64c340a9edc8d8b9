"""Regenerate clients/python/tests/errors_document.json from the service's deny table.

The client's suite checks its exception classes against that snapshot of ``GET /v1/errors``
(app.policy.denies.errors_document()); tests/authorize/test_errors_document.py fails while
the snapshot differs from the table. After changing the table, run from the repository root
(with the service importable, e.g. in its virtual environment)::

    python clients/python/scripts/update_errors_document.py

then bring toolgate_client/errors.py in step until clients/python/tests passes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOT = ROOT / "clients" / "python" / "tests" / "errors_document.json"


def render(document: dict) -> str:
    """The snapshot's text: sorted keys, two-space indent, one trailing newline."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from app.policy.denies import errors_document

    text = render(errors_document())
    old = SNAPSHOT.read_text(encoding="utf-8") if SNAPSHOT.exists() else None
    if old == text:
        print(f"{SNAPSHOT.relative_to(ROOT)} is up to date")
        return 0
    SNAPSHOT.write_text(text, encoding="utf-8")
    print(f"wrote {SNAPSHOT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
