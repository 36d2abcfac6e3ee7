"""Packaging: the wheel carries the component, installs into a fresh virtual
environment, and its `python -m mcp_toolgate` prints the expected bytes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

import mcp_toolgate
import vectorfile
from conftest import BINDINGS, FIXTURES, REPO, VECTORS

WASM = "mcp_toolgate/toolgate_policy.wasm"


def _build_wheel(project: Path, out: Path, env: dict[str, str] | None = None) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(project)],
        check=True,
        env={**{k: v for k, v in os.environ.items() if k != "TOOLGATE_COMPONENT"}, **(env or {})},
    )
    (wheel,) = out.glob("mcp_toolgate-*.whl")
    return wheel


def _copy_project(dest: Path) -> Path:
    project = dest / "bindings-py"
    project.mkdir(parents=True)
    for name in ("pyproject.toml", "hatch_build.py", "README.md"):
        shutil.copy(BINDINGS / name, project / name)
    shutil.copytree(
        BINDINGS / "src", project / "src", ignore=shutil.ignore_patterns("__pycache__", "toolgate_policy.wasm")
    )
    return project


def test_wheel_contains_the_component_and_type_marker(tmp_path: Path) -> None:
    wheel = _build_wheel(
        _copy_project(tmp_path / "repo"), tmp_path / "out", {"TOOLGATE_COMPONENT": str(mcp_toolgate.component_path())}
    )
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        assert {
            WASM,
            "mcp_toolgate/py.typed",
            "mcp_toolgate/__main__.py",
            "mcp_toolgate/router.py",
            "mcp_toolgate/middleware.py",
        } <= names
        assert z.read(WASM) == mcp_toolgate.component_path().read_bytes()


def test_build_step_builds_a_missing_component_with_cargo(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    project = _copy_project(repo)
    (repo / "Cargo.toml").write_text("[workspace]\n")
    log = tmp_path / "cargo-args"
    fake = tmp_path / "cargo"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > "{log}"\n'
        'for last; do :; done\nmkdir -p "$(dirname "$last")"\n'
        f'cp "{mcp_toolgate.component_path()}" "$last"\n'
    )
    fake.chmod(0o755)
    env = {"TOOLGATE_CARGO": str(fake)}
    wheel = _build_wheel(project, tmp_path / "out", env)
    assert log.read_text().split() == [
        "run",
        "-q",
        "--bin",
        "component-build",
        "--",
        str(repo / "dist" / "toolgate_policy.wasm"),
    ]
    with zipfile.ZipFile(wheel) as z:
        assert z.read(WASM) == mcp_toolgate.component_path().read_bytes()


@pytest.mark.skipif(os.environ.get("TOOLGATE_SKIP_FRESH_VENV") == "1", reason="TOOLGATE_SKIP_FRESH_VENV=1")
def test_pip_install_into_a_fresh_venv_and_run_the_cli(tmp_path: Path) -> None:
    env_dir = tmp_path / "fresh"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    lock = {
        line.split("==")[0]: line.split(";")[0].strip()
        for line in (BINDINGS / "requirements-dev.lock").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    # Literally `pip install ./bindings-py` (isolated build: hatchling from the
    # index; the build hook copies ../dist/toolgate_policy.wasm in).
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(BINDINGS), lock["wasmtime"]], check=True, cwd=tmp_path)
    # The fresh interpreter imports the installed package, not this checkout.
    where = subprocess.run(
        [str(py), "-c", "import mcp_toolgate; print(mcp_toolgate.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    ).stdout
    assert where.startswith(str(env_dir))
    vf = vectorfile.load(VECTORS / "retail-sample.json")
    cases = [c for c in vf.cases if c["op"] == "evaluate" and not c.get("context")]
    stdin = b"".join(vectorfile.call_bytes(c) + b"\n" for c in cases)
    args = ["--catalog", str(FIXTURES / "retail-tools.yaml"), "--policy", str(FIXTURES / "retail-policy.yaml")]
    out = subprocess.run(
        [str(py), "-m", "mcp_toolgate", "eval", *args], input=stdin, capture_output=True, check=True, cwd=tmp_path
    )
    assert out.stdout == b"".join(c["expect"].encode() + b"\n" for c in cases)
    listed = subprocess.run(
        [str(py), "-m", "mcp_toolgate", "list", *args], capture_output=True, check=True, cwd=tmp_path
    )
    assert json.loads(listed.stdout)["tools"][0]["name"] == "consultar_pedido"
    assert REPO.is_dir()
