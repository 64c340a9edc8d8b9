"""Reproducible installs: `make` installs what uv.lock holds, and again when it changes."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ("uv.lock", "pyproject.toml", "clients/python/pyproject.toml")


def _make_plan(folder: Path, target: str) -> str:
    """What `make -n TARGET` would run in `folder` (nothing is run)."""
    return subprocess.run(["make", "-n", target], cwd=folder, capture_output=True, text=True,
                          timeout=60, check=True).stdout


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The Makefile with its inputs and an up-to-date install, all with fixed times."""
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    for name in INPUTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
        os.utime(tmp_path / name, (1_000_000, 1_000_000))
    for name in (".uv/bin/uv", ".venv/.installed"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
        os.utime(tmp_path / name, (2_000_000, 2_000_000))
    return tmp_path


@pytest.mark.parametrize("changed", INPUTS)
@pytest.mark.parametrize("target", ["run", "test", "lint"])
def test_a_changed_lock_or_pyproject_reinstalls(checkout: Path, changed: str,
                                                target: str) -> None:
    assert "sync" not in _make_plan(checkout, target)  # up to date: nothing installed
    os.utime(checkout / changed, (3_000_000, 3_000_000))
    plan = _make_plan(checkout, target)
    assert "uv sync --locked" in plan, plan


def test_the_lock_is_the_one_install_source() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install" not in makefile.replace("pip install --quiet uv==", "")
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "uv sync --locked" in dockerfile and "pip install -e" not in dockerfile
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    locked = {p["name"] for p in lock["package"]}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"] + project["optional-dependencies"]["dev"]:
        name = requirement.split("[")[0].split(">")[0].split("<")[0].split("=")[0].strip()
        assert name.lower().replace("_", "-") in locked, name


def test_no_schemathesis_crash_files_are_committed() -> None:
    tracked = subprocess.run(["git", "ls-files", ".schemathesis"], cwd=ROOT,
                             capture_output=True, text=True, check=False).stdout
    assert tracked == ""
    assert ".schemathesis/" in (ROOT / ".gitignore").read_text().split()
