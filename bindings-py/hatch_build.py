"""Build hook: ships the policy component inside the package.

Copies ``../dist/toolgate_policy.wasm`` (the repo's component build output) to
``src/toolgate/toolgate_policy.wasm``; when it is missing, builds it first with
``cargo run -q -p component-build -- <repo>/dist/toolgate_policy.wasm``. An
sdist that already carries the component builds without the repo.
``TOOLGATE_COMPONENT`` points at another component file; ``TOOLGATE_CARGO``
names the cargo to run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

WASM = "toolgate_policy.wasm"


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        target = root / "src" / "toolgate" / WASM
        repo = root.parent
        override = os.environ.get("TOOLGATE_COMPONENT")
        source = Path(override) if override else repo / "dist" / WASM
        if not source.is_file() and not override and (repo / "Cargo.toml").is_file():
            self.app.display_info(f"toolgate: building the component into {source}")
            cargo = os.environ.get("TOOLGATE_CARGO", "cargo")
            subprocess.run(
                [cargo, "run", "-q", "-p", "component-build", "--", str(source)],
                cwd=repo,
                check=True,
            )
        if source.is_file():
            if not target.is_file() or target.read_bytes() != source.read_bytes():
                shutil.copyfile(source, target)
        elif not target.is_file():
            raise RuntimeError(f"toolgate: no component at {source} and none in the package")
