"""Where the component's native code comes from, and the wasmtime version that names it.

`_runtime.Runtime` maps shipped or cached code with `deserialize_file`, compiles
only when neither loads, and replaces a bad cache entry by rename; the version
is read from wasmtime's dist-info without importing `importlib.metadata`. The
code here is a tiny real component, so compiling it takes milliseconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import wasmtime
from wasmtime import component as wc

from mcp_toolgate import _compiled, _fastpath, _runtime

TINY = bytes(wasmtime.wat2wasm("(component (core module))"))


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    package, cache = tmp_path / "package", tmp_path / "cache"
    package.mkdir()
    monkeypatch.setattr(_runtime, "_PACKAGE_DIR", package)
    monkeypatch.setenv("TOOLGATE_CACHE_DIR", str(cache))
    return package, cache


def _code_name() -> str:
    return _compiled.code_name(_runtime.hashlib.sha256(TINY).hexdigest(), _fastpath.wasmtime_version())


def _forbid_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("compiled the component: the shipped or cached code should have loaded")

    monkeypatch.setattr(wc.Component, "__init__", refuse)


def test_the_cache_is_written_once_and_then_loaded(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _, cache = dirs
    _runtime.Runtime(TINY)
    entry = cache / _code_name()
    assert entry.is_file()
    inode = entry.stat().st_ino
    with monkeypatch.context() as m:
        _forbid_compiling(m)
        assert isinstance(_runtime.Runtime(TINY).component, wc.Component)
    assert entry.stat().st_ino == inode
    assert sorted(p.name for p in cache.iterdir()) == [entry.name], "no temporary file left behind"


def test_shipped_code_comes_first_and_fills_no_cache(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    package, cache = dirs
    _runtime.Runtime(TINY)
    _ship(package, cache)
    _forbid_compiling(monkeypatch)
    assert isinstance(_runtime.Runtime(TINY).component, wc.Component)
    assert list(cache.iterdir()) == []


def _ship(package: Path, cache: Path) -> Path:
    """Moves the cached code into the package, as a platform wheel carries it."""
    shipped = package / _compiled.SHIPPED_DIR / _code_name()
    shipped.parent.mkdir()
    (cache / _code_name()).rename(shipped)
    return shipped


@pytest.mark.skipif(os.name != "posix", reason="file owners and modes are POSIX's")
def test_shipped_code_anyone_may_write_is_not_loaded(dirs: tuple[Path, Path]) -> None:
    package, cache = dirs
    _runtime.Runtime(TINY)
    shipped = _ship(package, cache)
    shipped.chmod(0o646)
    _runtime.Runtime(TINY)
    assert (cache / _code_name()).is_file(), "compiled (and cached) instead of loading the shipped file"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file away needs root")
def test_shipped_code_another_user_owns_is_not_loaded(dirs: tuple[Path, Path]) -> None:
    package, cache = dirs
    _runtime.Runtime(TINY)
    shipped = _ship(package, cache)
    os.chown(shipped, package.stat().st_uid + 1, -1)
    _runtime.Runtime(TINY)
    assert (cache / _code_name()).is_file(), "compiled (and cached) instead of loading the shipped file"


def _loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files `deserialize_file` is asked to map, from now on."""
    seen: list[str] = []
    real = wc.Component.deserialize_file

    def spy(engine: wasmtime.Engine, path: str) -> wc.Component:
        seen.append(path)
        return real(engine, path)

    monkeypatch.setattr(wc.Component, "deserialize_file", spy)
    return seen


posix_only = pytest.mark.skipif(os.name != "posix", reason="file owners and modes are POSIX's")


@posix_only
@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666], ids=oct)
def test_cached_code_others_may_write_is_compiled_over(
    mode: int, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Security review 2, bindings item 5: native code runs unchecked, so a
    cache file group or others could have written is never loaded; it is
    compiled again and replaced by this user's own (0600)."""
    _, cache = dirs
    _runtime.Runtime(TINY)
    entry = cache / _code_name()
    entry.chmod(mode)
    seen = _loads(monkeypatch)
    assert isinstance(_runtime.Runtime(TINY).component, wc.Component)
    assert str(entry) not in seen
    assert entry.stat().st_mode & 0o777 == 0o600


@posix_only
def test_a_linked_cache_entry_is_not_loaded(
    dirs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, cache = dirs
    _runtime.Runtime(TINY)
    entry = cache / _code_name()
    target = tmp_path / "elsewhere"
    entry.rename(target)
    entry.symlink_to(target)
    seen = _loads(monkeypatch)
    _runtime.Runtime(TINY)
    assert str(entry) not in seen and str(target) not in seen
    assert not entry.is_symlink() and entry.is_file(), "the link replaced by this user's own file"


def _cached_code_is_not_loaded_once(cache: Path, monkeypatch: pytest.MonkeyPatch, change: Any) -> list[str]:
    """Caches the code, applies ``change`` to the cache folder, and checks the
    code is neither loaded nor rewritten there; returns the loads seen."""
    _runtime.Runtime(TINY)
    entry = cache / _code_name()
    inode = entry.stat().st_ino
    change(cache)
    seen = _loads(monkeypatch)
    _runtime.Runtime(TINY)
    assert str(entry) not in seen
    assert entry.stat().st_ino == inode, "nothing is written where it would never be loaded"
    return seen


@posix_only
def test_cached_code_in_a_folder_anyone_may_write_is_not_loaded_unless_sticky(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, cache = dirs
    seen = _cached_code_is_not_loaded_once(cache, monkeypatch, lambda c: c.chmod(0o777))
    cache.chmod(0o1777)  # sticky (/tmp): only the owner replaces a file
    with monkeypatch.context() as m:
        _forbid_compiling(m)
        _runtime.Runtime(TINY)
    assert seen == [str(cache / _code_name())]


@posix_only
def test_cached_code_in_a_folder_its_group_may_write_is_not_loaded(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A member of the group could rename another build's code to this name.
    _cached_code_is_not_loaded_once(dirs[1], monkeypatch, lambda c: c.chmod(0o770))


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a folder away needs root")
@pytest.mark.parametrize("mode", [0o755, 0o1777])
def test_cached_code_in_a_folder_another_user_owns_is_not_loaded(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, mode: int
) -> None:
    # The folder's owner could rename files in it, sticky or not (review 11:
    # another user's HOME kept by `sudo -E`).
    def give_away(cache: Path) -> None:
        cache.chmod(mode)
        os.chown(cache, os.geteuid() + 1, -1)

    _cached_code_is_not_loaded_once(dirs[1], monkeypatch, give_away)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file away needs root")
def test_cached_code_another_user_owns_is_not_loaded(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _, cache = dirs
    _runtime.Runtime(TINY)
    entry = cache / _code_name()
    os.chown(entry, os.geteuid() + 1, -1)
    seen = _loads(monkeypatch)
    _runtime.Runtime(TINY)
    assert str(entry) not in seen
    assert entry.stat().st_uid == os.geteuid(), "replaced by this user's own file"


@posix_only
def test_a_cache_folder_it_creates_is_private(dirs: tuple[Path, Path]) -> None:
    _, cache = dirs
    _runtime.Runtime(TINY)
    assert cache.stat().st_mode & 0o777 == 0o700


@posix_only
@pytest.mark.parametrize("how", ["link", "folder anyone may write"])
def test_shipped_code_that_is_a_link_or_in_an_open_folder_is_not_loaded(
    how: str, dirs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package, cache = dirs
    _runtime.Runtime(TINY)
    shipped = _ship(package, cache)
    if how == "link":
        target = tmp_path / "elsewhere"
        shipped.rename(target)
        shipped.symlink_to(target)
    else:
        shipped.parent.chmod(0o777)
    seen = _loads(monkeypatch)
    _runtime.Runtime(TINY)
    assert str(shipped) not in seen
    assert (cache / _code_name()).is_file(), "compiled (and cached) instead of loading the shipped file"


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "directory"])
def test_bad_code_is_compiled_again_and_the_cache_replaced(
    damage: str, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    package, cache = dirs
    _runtime.Runtime(TINY)
    entry = cache / _code_name()
    good = entry.read_bytes()
    shipped = package / _compiled.SHIPPED_DIR / _code_name()
    shipped.parent.mkdir()
    shipped.write_bytes(b"\x00" * 64)  # shipped code that does not load either
    if damage == "directory":
        entry.unlink()
        entry.mkdir()
    else:
        entry.write_bytes(
            {"garbage": b"not native code" * 100, "truncated": good[: len(good) // 2], "empty": b""}[damage]
        )
    assert isinstance(_runtime.Runtime(TINY).component, wc.Component)
    if damage == "directory":
        assert entry.is_dir(), "a directory in the way is left alone (the write fails quietly)"
        assert [p.name for p in cache.iterdir()] == [entry.name], "and the temporary file is removed"
        return
    assert entry.read_bytes() == good
    with monkeypatch.context() as m:
        _forbid_compiling(m)
        _runtime.Runtime(TINY)


@pytest.mark.parametrize("setting", ["off", "0", ""])
def test_no_cache_compiles_every_time_and_writes_nothing(
    setting: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package, home = tmp_path / "package", tmp_path / "xdg"
    package.mkdir()
    monkeypatch.setattr(_runtime, "_PACKAGE_DIR", package)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.delenv("TOOLGATE_CACHE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)  # a setting taken for a relative path would write here
    _runtime.Runtime(TINY)  # the default cache: $XDG_CACHE_HOME/toolgate
    default = home / "toolgate" / _code_name()
    assert default.is_file()
    monkeypatch.setenv("TOOLGATE_CACHE_DIR", setting)
    with monkeypatch.context() as m:
        _forbid_compiling(m)
        with pytest.raises(AssertionError, match="compiled the component"):
            _runtime.Runtime(TINY)  # the default cache's code is not used either
    inode = default.stat().st_ino
    _runtime.Runtime(TINY)
    assert default.stat().st_ino == inode and sorted(p.name for p in home.rglob("*")) == ["toolgate", default.name]
    assert list(package.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["package", "xdg"]


# -- the wasmtime version -------------------------------------------------------


def test_the_version_is_the_one_importlib_metadata_gives() -> None:
    assert _fastpath.wasmtime_version() == metadata.version("wasmtime")


def test_importing_the_package_and_its_runtime_does_not_import_importlib_metadata() -> None:
    # Compared with what the interpreter had before (a .pth file of some environment may import either).
    code = (
        "import sys\n"
        "before = {m: m in sys.modules for m in ('importlib.metadata', 'tempfile')}\n"
        "import mcp_toolgate\n"
        "from mcp_toolgate import _fastpath, _runtime\n"
        "_fastpath.wasmtime_version()\n"
        "print(*(m for m, was in before.items() if m in sys.modules and not was))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == []


def _dist_info(site: Path, folder: str, metadata_text: str) -> None:
    (site / folder).mkdir(parents=True)
    (site / folder / "METADATA").write_text(metadata_text, encoding="utf-8")


def test_the_version_beside_the_package(tmp_path: Path) -> None:
    _dist_info(
        tmp_path, "wasmtime-50.0.1.dist-info", "Metadata-Version: 2.1\nName: wasmtime\nVersion: 50.0.1\n\nVersion: 9\n"
    )
    _dist_info(tmp_path, "wasmtime_extra-1.0.dist-info", "Name: wasmtime-extra\nVersion: 1.0\n")
    _dist_info(tmp_path, "wasmtime-extra-2.0.dist-info", "Name: wasmtime-extra\nVersion: 2.0\n")
    assert _fastpath._version_beside(tmp_path) == "50.0.1"


@pytest.mark.parametrize(
    "folders",
    [
        [],  # not installed from a wheel here (a source tree, another layout)
        [
            ("wasmtime-49.0.0.dist-info", "Name: wasmtime\nVersion: 49.0.0\n"),
            ("wasmtime-50.0.1.dist-info", "Name: wasmtime\nVersion: 50.0.1\n"),
        ],
        [("wasmtime-50.0.1.dist-info", "Name: wasmtime\n")],  # no Version header
        [("wasmtime-50.0.1.dist-info", "Name: wasmtime\n\nVersion: 50.0.1\n")],  # only in the body
    ],
)
def test_anything_unclear_leaves_it_to_importlib_metadata(tmp_path: Path, folders: list[tuple[str, str]]) -> None:
    for folder, text in folders:
        _dist_info(tmp_path, folder, text)
    assert _fastpath._version_beside(tmp_path) is None


def test_an_unreadable_metadata_file_leaves_it_to_importlib_metadata(tmp_path: Path) -> None:
    (tmp_path / "wasmtime-50.0.1.dist-info" / "METADATA").mkdir(parents=True)
    assert _fastpath._version_beside(tmp_path) is None
    (tmp_path / "wasmtime-50.0.1.dist-info" / "METADATA").rmdir()
    (tmp_path / "wasmtime-50.0.1.dist-info" / "METADATA").write_bytes(b"Name: wasmtime\nVersion: \xff\n")
    assert _fastpath._version_beside(tmp_path) is None
