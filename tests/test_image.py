"""The service image (Dockerfile, .dockerignore, compose.yaml): what goes in, and a real build.

The build test builds the image with podman on a local Debian base (made with mmdebstrap
and `podman import` the first time, then reused; no image registry is needed), runs it
with buildah (chroot isolation, host network: no daemon, no cgroups needed) and asks the
server in it for /healthz, its health check and one decision. It needs podman, buildah and
mmdebstrap (Debian packages); without them it skips, unless TOOLGATE_IMAGE_TEST=1 (CI),
which makes that a failure. TOOLGATE_IMAGE_TEST=0 skips it. TOOLGATE_IMAGE_BASE=<image>
builds on that base instead (e.g. the Dockerfile's default, where a registry is reachable).
A first run takes a few minutes (the base: ~2 min; the build: ~2 min); later runs reuse
both.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.serving import free_port

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
LOCAL_BASE = "localhost/toolgate-base:bookworm"
IMAGE = "localhost/toolgate:test"
IMAGE_TEST = os.environ.get("TOOLGATE_IMAGE_TEST", "")


# --- what the files say ---------------------------------------------------------------------

def _instructions(text: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", text)
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1])
            for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_the_build_context_holds_only_what_the_image_copies() -> None:
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    assert patterns[0] == "*", "exclude everything first, then name what goes in"
    included = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    copied = set()
    for op, args in _instructions(DOCKERFILE):
        if op == "COPY" and not args.startswith("--from"):
            copied.update(a.rstrip("/").removeprefix("./") for a in args.split()[:-1])
    assert copied <= included, f"COPY sources the context lacks: {copied - included}"
    assert included <= copied, f"in the context but never copied: {included - copied}"
    for local in (".venv", "toolgate.db", "toolgate.admin-key", ".uv", ".git"):
        assert local not in included
    for excluded in ("**/*.db", "**/*.admin-key", "**/__pycache__"):
        assert excluded in patterns  # also inside the folders that go in


def test_the_base_is_a_pinned_build_argument_and_tini_is_pid_1() -> None:
    steps = _instructions(DOCKERFILE)
    base = next(args for op, args in steps if op == "ARG" and args.startswith("BASE="))
    assert re.fullmatch(r"BASE=[\w./-]+:\d+\.\d+\.\d+-[\w.-]+", base), base  # a version tag
    assert all(args.split()[0] == "${BASE}" for op, args in steps if op == "FROM")
    assert ("ENTRYPOINT", '["/usr/bin/tini", "--"]') in steps
    cmd = next(args for op, args in steps if op == "CMD")
    assert json.loads(cmd) == ["toolgate", "serve"]  # exec form: tini's child is toolgate
    assert re.search(r"tini=[\d.]+-", DOCKERFILE), "tini is installed at a pinned version"


def test_the_health_check_follows_the_configured_port() -> None:
    check = next(args for op, args in _instructions(DOCKERFILE) if op == "HEALTHCHECK")
    assert "TOOLGATE_PORT" in check and "8000" not in check.replace("or '8000'", "")
    assert "CMD [" in check  # exec form


def test_compose_builds_the_image_once() -> None:
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    toolgate = {name: s for name, s in services.items()
                if name != "postgres" and "monitoring" not in s.get("profiles", ())}
    assert [name for name, s in toolgate.items() if "build" in s] == ["migrate"]
    assert {s["image"] for s in toolgate.values()} == {"toolgate:local"}
    assert all(s.get("pull_policy") == "never" for s in toolgate.values())
    assert re.fullmatch(r"postgres:\d+\.\d+", services["postgres"]["image"])


# --- a real build -----------------------------------------------------------------------------

def _need_tools() -> None:
    if IMAGE_TEST == "0":
        pytest.skip("TOOLGATE_IMAGE_TEST=0")
    missing = [t for t in ("podman", "buildah", "mmdebstrap") if shutil.which(t) is None]
    if missing:
        reason = (f"{', '.join(missing)} not installed (Debian: apt-get install podman buildah "
                  "mmdebstrap)")
        if IMAGE_TEST == "1":
            pytest.fail(f"TOOLGATE_IMAGE_TEST=1 but {reason}")
        pytest.skip(reason)


def _run(*args: str, env: dict[str, str], timeout: float = 600,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(args), env=env, capture_output=True, text=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(args[:3])} ... exited {result.returncode}:\n"
                    f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


@pytest.fixture(scope="module")
def container_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    _need_tools()
    conf = tmp_path_factory.mktemp("containers") / "containers.conf"
    # podman's default ulimits cannot be applied by every runtime here; none are needed.
    conf.write_text("[containers]\ndefault_ulimits = []\n")
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


def _local_base(env: dict[str, str], folder: Path) -> str:
    """A Debian bookworm base with python3 and python3-venv, made once and kept in podman's
    store. It trusts the certificates this machine trusts (a proxy's too)."""
    if _run("podman", "image", "exists", LOCAL_BASE, env=env, check=False).returncode == 0:
        return LOCAL_BASE
    tarball = folder / "base.tar"
    _run("mmdebstrap", "--variant=minbase", "--include=python3,python3-venv,ca-certificates",
         "--customize-hook=copy-in /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs",
         "bookworm", str(tarball), env=env, timeout=1200)
    _run("podman", "import", "-q", str(tarball), LOCAL_BASE, env=env)
    tarball.unlink()
    return LOCAL_BASE


@pytest.fixture(scope="module")
def image(container_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> str:
    env = container_env
    base = os.environ.get("TOOLGATE_IMAGE_BASE") or _local_base(
        env, tmp_path_factory.mktemp("base"))
    before = _run("podman", "image", "inspect", "--format", "{{.Id}}", IMAGE, env=env,
                  check=False).stdout.strip()
    _run("podman", "build", "--isolation", "chroot", "--network", "host", "--format", "docker",
         "--build-arg", f"BASE={base}", "-t", IMAGE, str(ROOT), env=env, timeout=1800)
    after = _run("podman", "image", "inspect", "--format", "{{.Id}}", IMAGE, env=env).stdout
    if before and before != after.strip():  # the previous build's image, now untagged
        _run("podman", "rmi", before, env=env, check=False)
    return IMAGE


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(
                int(entry.name))
    found, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            found.append(pid)
            todo.append(pid)
    return found


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the image's PID 1 (tini), which hands it to `toolgate serve`; killing
    `buildah run` itself would leave the server behind."""
    tree = _descendants(proc.pid)
    for pid in tree:
        if _cmdline(pid)[:1] == ["/usr/bin/tini"]:
            os.kill(pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        for pid in [proc.pid, *tree]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def served(image: str, container_env: dict[str, str],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    env = container_env
    name = f"toolgate-test-{os.getpid()}"
    _run("buildah", "rm", name, env=env, check=False)
    _run("buildah", "from", "--name", name, image, env=env)
    config = json.loads(_run("podman", "image", "inspect", image, env=env).stdout)[0]["Config"]
    port = free_port()
    log = tmp_path_factory.mktemp("image") / "server.log"
    with open(log, "wb") as out:  # what `docker logs` would show
        proc = subprocess.Popen(
            ["buildah", "run", "--isolation", "chroot", "--network", "host",
             "--env", f"TOOLGATE_PORT={port}", "--env", "TOOLGATE_HOST=127.0.0.1",
             "--env", "TINI_SUBREAPER=1",  # chroot isolation: tini is not PID 1 here
             name, "--", *config["Entrypoint"], *config["Cmd"]],
            env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the image's server exited {proc.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the image's server did not answer in 120 s:\n{log.read_text()}")
            time.sleep(0.2)
        yield name, url, log
    finally:
        _stop(proc)
        _run("buildah", "rm", name, env=env, check=False)


@pytest.mark.slow
def test_the_image_serves_a_decision(served: tuple[str, str, Path],
                                     container_env: dict[str, str]) -> None:
    name, url, log = served
    env = container_env
    assert httpx.get(f"{url}/healthz", timeout=10).json() == {"status": "ok"}
    # The first admin key is on the volume, and its path (never the key) is in the log.
    key = _run("buildah", "run", "--isolation", "chroot", name, "--", "cat",
               "/data/toolgate.admin-key", env=env).stdout.strip()
    assert key.startswith("tg_")
    assert key not in log.read_text() and "/data/toolgate.admin-key" in log.read_text()
    assert _run("buildah", "run", "--isolation", "chroot", name, "--", "id", "-u",
                env=env).stdout.strip() == "10001"
    answer = httpx.post(f"{url}/v1/authorize-tool", headers={"Authorization": f"Bearer {key}"},
                        json={"tool": {"name": "fs.write", "capability": {
                            "writes": True, "checkpointable": True, "unsafe": False}},
                              "safety_profile": {}}, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.json()["deny"]["code"] == "sandbox_required"


@pytest.mark.slow
def test_the_image_health_check_passes_on_another_port(served: tuple[str, str, Path],
                                                       image: str,
                                                       container_env: dict[str, str]) -> None:
    name, url, _ = served
    env = container_env
    inspected = json.loads(_run("podman", "image", "inspect", image, env=env).stdout)[0]
    test = inspected["Healthcheck"]["Test"]  # podman puts it beside Config
    assert test[0] == "CMD"
    port = url.rsplit(":", 1)[1]
    assert port != "8000"
    check = _run("buildah", "run", "--isolation", "chroot", "--network", "host",
                 "--env", f"TOOLGATE_PORT={port}", name, "--", *test[1:], env=env, check=False)
    assert check.returncode == 0, check.stderr
