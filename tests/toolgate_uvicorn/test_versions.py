"""The plug-in runs only on the uvicorn releases it was tested with."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

from app.cli.main import _http_protocol
from app.config import Settings
from toolgate_uvicorn import PROTOCOL, TESTED_UVICORN, protocol_for

ROOT = Path(__file__).resolve().parents[2]


def test_the_plugin_is_used_only_on_a_tested_uvicorn():
    assert protocol_for("0.54.0") == PROTOCOL
    assert protocol_for("0.55.0") is None and protocol_for("1.0.0") is None


def test_the_installed_uvicorn_is_a_tested_one_and_pyproject_pins_it():
    assert protocol_for(version("uvicorn")) == PROTOCOL
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in deps if d.startswith("uvicorn")]
    for minor in TESTED_UVICORN:
        assert f">={minor}" in pin
    assert "<" in pin  # an upper bound: the next release may change the private protocol


def test_serve_can_be_told_to_use_uvicorns_own_protocol():
    assert _http_protocol(Settings(http_protocol="uvicorn")) == "app.edge.guard:Guarded"
    assert _http_protocol(Settings()) == PROTOCOL
