"""Build hook: ships the policy component inside the package, and, for a
platform wheel, the native ``toolgate`` binary.

The component: copies ``../dist/toolgate_policy.wasm`` (the repo's component
build output) to ``src/mcp_toolgate/toolgate_policy.wasm``; when it is missing,
builds it first with ``cargo run -q --bin component-build -- <repo>/dist/toolgate_policy.wasm``.
An sdist that already carries the component builds without the repo.
``TOOLGATE_COMPONENT`` points at another component file; ``TOOLGATE_CARGO``
names the cargo to run.

The native binary (wheel only): with ``TOOLGATE_NATIVE_BINARY=/path/to/toolgate``
(``target/release/toolgate``) the wheel carries it as
``mcp_toolgate/_native/toolgate`` (``toolgate.exe`` for a PE file), executable,
and is tagged ``py3-none-<platform>``, the platform read from the binary: for a
Linux ELF, ``manylinux_2_<N>_<arch>`` where ``2.<N>`` is the newest
``GLIBC_2.<N>`` symbol version the binary needs (its ``.gnu.version_r``
section). ``TOOLGATE_WHEEL_PLATFORM`` sets the platform tag instead (macOS,
Windows, a static or musl binary). Without ``TOOLGATE_NATIVE_BINARY`` the
wheel is pure, ``py3-none-any``: the library and the ``eval``/``list`` CLI.

A platform wheel also carries the component compiled to native code by
wasmtime ``PRECOMPILE_WASMTIME`` (a build dependency of that wheel only,
``dependencies()``), and pins that wasmtime in its metadata: the first start
on a fresh machine loads the code instead of compiling for seconds (#17). The
configuration and file name come from ``src/mcp_toolgate/_compiled.py``,
the runtime's own. Code for CPU features the machine lacks is refused by
wasmtime, and the runtime compiles as the pure wheel does. Beside the
binary goes the binary's own native code (``toolgate precompile``, for the
wasmtime linked into it), so the gateway's first start loads it too.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import struct
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: The wasmtime a platform wheel compiles its code with and pins: the version
#: of the lock files (requirements-dev.lock, requirements-mcp2.lock).
PRECOMPILE_WASMTIME = "50.0.1"

WASM = "toolgate_policy.wasm"
PACKAGE = "mcp_toolgate"
NATIVE_ENV = "TOOLGATE_NATIVE_BINARY"
PLATFORM_ENV = "TOOLGATE_WHEEL_PLATFORM"

# ELF e_machine -> the wheel platform's architecture.
_ELF_ARCH = {62: "x86_64", 183: "aarch64", 3: "i686", 40: "armv7l", 21: "ppc64le", 22: "s390x", 243: "riscv64"}
_SHT_GNU_VERNEED = 0x6FFFFFFE


def glibc_requirements(data: bytes) -> tuple[str, list[tuple[int, int]]]:
    """(architecture, every ``GLIBC_x.y`` version the ELF file ``data`` needs),
    read from its section headers and ``.gnu.version_r`` (SHT_GNU_verneed)."""
    if data[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    if data[4] != 2:
        raise ValueError("only 64-bit ELF files are supported")
    end = {1: "<", 2: ">"}[data[5]]
    (machine,) = struct.unpack_from(end + "H", data, 18)
    if machine not in _ELF_ARCH:
        raise ValueError(f"unknown ELF machine {machine}")
    arch = _ELF_ARCH[machine]
    if arch == "ppc64le" and end == ">":
        arch = "ppc64"
    (shoff,) = struct.unpack_from(end + "Q", data, 0x28)
    shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3A)
    sections = []
    for i in range(shnum):
        _name, kind, _flags, _addr, offset, size, link, info = struct.unpack_from(
            end + "IIQQQQII", data, shoff + i * shentsize
        )
        sections.append((kind, offset, size, link, info))
    versions: set[tuple[int, int]] = set()
    for kind, offset, _size, link, count in sections:
        if kind != _SHT_GNU_VERNEED:
            continue
        strtab = sections[link][1]

        def name_at(at: int, strtab: int = strtab) -> str:
            stop = data.index(b"\0", strtab + at)
            return data[strtab + at : stop].decode("ascii", "replace")

        entry = offset
        for _ in range(count):
            _ver, aux_count, _file, aux, nxt = struct.unpack_from(end + "HHIII", data, entry)
            at = entry + aux
            for _ in range(aux_count):
                _hash, _vflags, _other, name, aux_next = struct.unpack_from(end + "IHHII", data, at)
                m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", name_at(name))
                if m:
                    versions.add((int(m.group(1)), int(m.group(2))))
                if not aux_next:
                    break
                at += aux_next
            if not nxt:
                break
            entry += nxt
    return arch, sorted(versions)


def platform_tag(binary: Path) -> str:
    """The wheel platform tag for ``binary`` (see the module doc)."""
    override = os.environ.get(PLATFORM_ENV)
    if override:
        return override
    data = binary.read_bytes()
    if data[:4] != b"\x7fELF":
        raise RuntimeError(f"{binary} is not an ELF file: set {PLATFORM_ENV} to the wheel's platform tag")
    arch, versions = glibc_requirements(data)
    if not versions:
        raise RuntimeError(f"{binary} needs no GLIBC symbol version (static or musl?): set {PLATFORM_ENV}")
    major, minor = versions[-1]
    return f"manylinux_{major}_{minor}_{arch}"


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def dependencies(self) -> list[str]:
        if os.environ.get(NATIVE_ENV):
            return [f"wasmtime=={PRECOMPILE_WASMTIME}"]
        return []

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        target = root / "src" / PACKAGE / WASM
        repo = root.parent
        override = os.environ.get("TOOLGATE_COMPONENT")
        source = Path(override) if override else repo / "dist" / WASM
        if not source.is_file() and not override and (repo / "Cargo.toml").is_file():
            self.app.display_info(f"toolgate: building the component into {source}")
            cargo = os.environ.get("TOOLGATE_CARGO", "cargo")
            subprocess.run(
                [cargo, "run", "-q", "--bin", "component-build", "--", str(source)],
                cwd=repo,
                check=True,
            )
        if source.is_file():
            if not target.is_file() or target.read_bytes() != source.read_bytes():
                shutil.copyfile(source, target)
        elif not target.is_file():
            raise RuntimeError(f"toolgate: no component at {source} and none in the package")

        native = os.environ.get(NATIVE_ENV)
        if self.target_name != "wheel" or version == "editable" or not native:
            return
        binary = Path(native).resolve()
        if not binary.is_file():
            raise RuntimeError(f"toolgate: {NATIVE_ENV}={native} is not a file")
        if not os.access(binary, os.X_OK):
            raise RuntimeError(f"toolgate: {NATIVE_ENV}={native} is not executable")
        tag = platform_tag(binary)
        name = "toolgate.exe" if binary.read_bytes()[:2] == b"MZ" else "toolgate"
        self.app.display_info(f"toolgate: platform wheel py3-none-{tag} carrying {binary}")
        build_data["force_include"][str(binary)] = f"{PACKAGE}/_native/{name}"
        code = self._native_code(target)
        build_data["force_include"][str(code)] = f"{PACKAGE}/_native/{code.name}"
        shipped = self._binary_native_code(binary)
        if shipped is not None:
            build_data["force_include"][str(shipped)] = f"{PACKAGE}/_native/{shipped.name}"
        build_data["dependencies"].append(f"wasmtime=={PRECOMPILE_WASMTIME}")
        build_data["pure_python"] = False
        build_data["tag"] = f"py3-none-{tag}"

    def _binary_native_code(self, binary: Path) -> Path | None:
        """The native binary's own code for the component (its wasmtime is
        not Python's): ``toolgate precompile DIR`` writes it under the name
        the binary looks for beside itself. None for a binary this machine
        cannot run (another platform's), which compiles at its first start."""
        out = Path(self.root) / "build" / "binary-native-code"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        try:
            done = subprocess.run([str(binary), "precompile", str(out)], capture_output=True, text=True)
        except OSError as e:  # another platform's executable format
            self.app.display_warning(f"toolgate: {binary} does not run here ({e}): no native code beside it")
            return None
        if done.returncode != 0:
            raise RuntimeError(f"toolgate: {binary} precompile failed: {done.stderr.strip()}")
        path = Path(done.stdout.strip())
        if path.parent != out or not path.is_file():
            raise RuntimeError(f"toolgate: {binary} precompile wrote {path}, not into {out}")
        self.app.display_info(f"toolgate: the binary's native code {path.name} ({path.stat().st_size} bytes)")
        return path

    def _native_code(self, wasm: Path) -> Path:
        """Compiles the component as the runtime would and writes the code
        under ``build/`` with the runtime's file name for it."""
        import wasmtime  # a build dependency of platform wheels only
        from wasmtime import component as wc

        spec = importlib.util.spec_from_file_location(
            "_toolgate_compiled", Path(self.root) / "src" / PACKAGE / "_compiled.py"
        )
        if spec is None or spec.loader is None:
            raise RuntimeError("toolgate: src/mcp_toolgate/_compiled.py is missing")
        compiled = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(compiled)
        found = metadata.version("wasmtime")
        if found != PRECOMPILE_WASMTIME:
            raise RuntimeError(f"toolgate: the build has wasmtime {found}, the wheel pins {PRECOMPILE_WASMTIME}")
        data = wasm.read_bytes()
        engine = wasmtime.Engine(compiled.engine_config(wasmtime))
        code = wc.Component(engine, data).serialize()
        out = Path(self.root) / "build" / "native-code"
        out.mkdir(parents=True, exist_ok=True)
        for stale in out.glob("*.cwasm"):
            stale.unlink()
        path = out / compiled.code_name(hashlib.sha256(data).hexdigest(), found)
        path.write_bytes(code)
        self.app.display_info(f"toolgate: native code for wasmtime {found} ({len(code)} bytes)")
        return path
