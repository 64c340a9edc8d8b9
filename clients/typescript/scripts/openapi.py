"""Print toolgate's OpenAPI document (the app's, as served at /openapi.json) to stdout.

`npm run generate` feeds it to openapi-typescript to write src/openapi.ts; the service's
suite (tests/client/test_typescript.py) does the same and fails while the checked-in file
differs. Run with the service importable (the repository's .venv):

    ../../.venv/bin/python scripts/openapi.py > openapi.json

TOOLGATE_* settings are ignored: the document is the one of the default settings.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def document() -> dict:
    for key in [k for k in os.environ if k.startswith("TOOLGATE_")]:
        del os.environ[key]
    sys.path.insert(0, str(ROOT))
    from app.config import Settings
    from app.main import create_app

    return create_app(Settings()).openapi()


if __name__ == "__main__":
    json.dump(document(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
