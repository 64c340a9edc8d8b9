"""The client tests use this checkout's client: clients/python/src goes first on sys.path.

A virtual environment may hold another checkout's editable install of toolgate_client (one
environment shared by several worktrees); these tests must exercise the source they sit
beside, as clients/python/tests does.
"""

import sys
from pathlib import Path

CLIENT_SRC = Path(__file__).resolve().parents[2] / "clients" / "python" / "src"
if str(CLIENT_SRC) not in sys.path:
    sys.path.insert(0, str(CLIENT_SRC))
