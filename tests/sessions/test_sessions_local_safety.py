"""LocalFileStorage never reads or writes outside its directory and never follows symlinks."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from async_helper import arun
from framework_agents.errors import StorageKeyInvalidError
from framework_agents.sessions import InMemoryStorage, LocalFileStorage
from framework_agents.sessions._keys import is_valid_key
from framework_agents.sessions._log import open_value

T = TypeVar("T")
SECRET = b"TOP-SECRET-SENTINEL-BYTES"


def tree(top: Path) -> dict[str, tuple[str, bytes | str | None]]:
    """Every path under ``top`` (not following links) with its type and content."""
    out: dict[str, tuple[str, bytes | str | None]] = {}
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(top))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", None)
            else:
                out[rel] = ("file", p.read_bytes())
    return out


@pytest.fixture
def jail(tmp_path: Path) -> tuple[Path, Path]:
    """``(parent, root)``: the storage root inside a parent holding secrets beside it."""
    parent = tmp_path / "parent"
    root = parent / "root"
    root.mkdir(parents=True)
    (parent / "secret.txt").write_bytes(SECRET)
    (parent / "root-sibling").mkdir()
    (parent / "root-sibling" / "secret.txt").write_bytes(SECRET)
    (parent / "rootx").mkdir()  # a string-prefix check would let "root" + "x" through
    (parent / "rootx" / "secret.txt").write_bytes(SECRET)
    return parent, root


# -- the hypothesis traversal property --------------------------------------------------

_NASTY = [
    "..",
    ".",
    "/",
    "\\",
    "\x00",
    "%2e",
    "%2f",
    "%2e%2e",
    "\u2025",
    "\u2024",
    "\uff0e",
    "\uff0f",
    "\uff3c",
    "\u2215",
    "\u2044",
    "\u0338",
    "C:",
    ":",
    "~",
    "$HOME",
    "\n",
    " ",
    "CON",
    "nul",
    "\u00e9",
    "\U0001f600",
    "\u200b",
    "\ufeff",
    ".hidden",
    "x.",
]
_GOOD = ["secret.txt", "root", "rootx", "root-sibling", "a", "b.json", "a..b", "x-1", "_"]


@st.composite
def nasty_keys(draw: st.DrawFn) -> str:
    """Keys built from look-alikes, traversal pieces and legitimate segments, mixed."""
    nasty_share = draw(st.sampled_from([0.0, 0.2, 0.6, 1.0]))
    parts = []
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.floats(0, 1)) < nasty_share:
            parts.append(draw(st.one_of(st.sampled_from(_NASTY), st.text(max_size=4))))
        else:
            parts.append(draw(st.sampled_from(_GOOD)))
    seps = draw(st.lists(st.sampled_from(["/", "/", "/", "", "//", "\\"]), min_size=len(parts)))
    key = "".join(p + s for p, s in zip(parts, seps, strict=False)).rstrip("/")
    if draw(st.booleans()):
        key = draw(st.sampled_from(["/", "../", "./", "\\", "root/../", "", ""])) + key
    return key


# 60 keys in make test (the pinned examples first), 300 in make stress: each key is tried
# against a real directory tree.
@pytest.mark.parametrize("examples", [60, pytest.param(300, marks=pytest.mark.slow)])
def test_no_key_reaches_outside_the_root(jail: tuple[Path, Path], examples: int) -> None:
    parent, root = jail

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(key=nasty_keys())
    @example(key="../secret.txt")
    @example(key="../root-sibling/secret.txt")
    @example(key="../rootx/secret.txt")
    @example(key="/" + "/".join(["..", "secret.txt"]))
    @example(key="\u2025/secret.txt")
    @example(key="\uff0e\uff0e\uff0fsecret.txt")
    @example(key="%2e%2e/secret.txt")
    @example(key="..\\secret.txt")
    @example(key="a/\x00/../../secret.txt")
    @example(key="a..b.json")
    def check(key: str) -> None:
        storage = LocalFileStorage(root)
        outside_before = {k: v for k, v in tree(parent).items() if not k.startswith("root/")}
        root_before = tree(root)

        async def body() -> None:
            refused = 0
            for call in (
                lambda: storage.get(key),
                lambda: storage.put(key, b"written"),
                lambda: storage.get(key),
                lambda: storage.list(key),
                lambda: storage.delete(key),
            ):
                try:
                    result = await call()
                except StorageKeyInvalidError:
                    refused += 1
                    continue
                if isinstance(result, bytes):
                    assert result != SECRET
                    assert SECRET not in result
            # A key is refused by every method or by none; refused keys touch nothing.
            assert refused in (0, 4, 5)
            if refused >= 4:
                assert tree(root) == root_before
                assert not is_valid_key(key)
                with pytest.raises(StorageKeyInvalidError):
                    await InMemoryStorage().put(key, b"x")  # the same rule in memory

        arun(body())
        outside_after = {k: v for k, v in tree(parent).items() if not k.startswith("root/")}
        assert outside_after == outside_before
        for rel, (kind, _) in tree(root).items():
            assert kind in ("dir", "file"), rel

    check()


# -- symlinks ---------------------------------------------------------------------------


def test_symlinked_file_inside_root_is_not_followed(jail: tuple[Path, Path]) -> None:
    parent, root = jail
    (root / "link.json").symlink_to(parent / "secret.txt")
    storage = LocalFileStorage(root)

    async def body() -> None:
        with pytest.raises(StorageKeyInvalidError, match="symlink"):
            await storage.get("link.json")
        with pytest.raises(StorageKeyInvalidError, match="symlink"):
            await storage.put("link.json", b"overwrite")
        with pytest.raises(StorageKeyInvalidError, match="symlink"):
            await storage.delete("link.json")
        assert await storage.list() == []
        assert await storage.list("link") == []

    arun(body())
    assert (parent / "secret.txt").read_bytes() == SECRET
    assert (root / "link.json").is_symlink()


def test_symlinked_directory_inside_root_is_not_followed(jail: tuple[Path, Path]) -> None:
    parent, root = jail
    (root / "sub").symlink_to(parent / "root-sibling", target_is_directory=True)
    (root / "real").mkdir()
    (root / "real" / "deeper").symlink_to(parent, target_is_directory=True)
    storage = LocalFileStorage(root)
    before = tree(parent / "root-sibling")

    async def body() -> None:
        for key in ("sub/secret.txt", "real/deeper/secret.txt"):
            with pytest.raises(StorageKeyInvalidError, match="symlink"):
                await storage.get(key)
            with pytest.raises(StorageKeyInvalidError, match="symlink"):
                await storage.put(key, b"overwrite")
            with pytest.raises(StorageKeyInvalidError, match="symlink"):
                await storage.put(key.replace("secret.txt", "new/file"), b"x")
            with pytest.raises(StorageKeyInvalidError, match="symlink"):
                await storage.delete(key)
        assert await storage.list() == []
        assert await storage.list("sub/") == []
        assert await storage.list("real/deeper/") == []

    arun(body())
    assert tree(parent / "root-sibling") == before
    assert (parent / "secret.txt").read_bytes() == SECRET


def test_symlink_to_a_file_inside_root_is_refused_too(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path / "root")
    arun(storage.put("real", b"1"))
    (tmp_path / "root" / "alias").symlink_to(tmp_path / "root" / "real")
    with pytest.raises(StorageKeyInvalidError):
        arun(storage.get("alias"))
    assert arun(storage.list()) == ["real"]


def test_root_given_through_a_symlink_is_resolved_once(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    storage = LocalFileStorage(tmp_path / "alias")
    assert storage.dir == (tmp_path / "real").resolve()
    arun(storage.put("k", b"v"))
    assert open_value("k", (tmp_path / "real" / "k").read_bytes()).data == b"v"


def test_root_swapped_for_a_symlink_later_is_refused(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path / "root")
    arun(storage.put("k", b"v"))
    (tmp_path / "root").rename(tmp_path / "moved")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "k").write_bytes(SECRET)
    (tmp_path / "root").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(StorageKeyInvalidError, match="root"):
        arun(storage.get("k"))


# -- files on disk ----------------------------------------------------------------------


def test_layout_modes_and_no_leftover_temp_files(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path / "root")
    arun(storage.put("session/s1/x.json", b"{}"))
    target = tmp_path / "root" / "session" / "s1" / "x.json"
    assert open_value("x.json", target.read_bytes()).data == b"{}"
    assert stat.S_IMODE(target.stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE(target.parent.stat().st_mode) & 0o077 == 0
    assert sorted(p.name for p in target.parent.iterdir()) == ["x.json"]


def test_delete_prunes_emptied_directories_but_not_the_root(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path / "root")
    arun(storage.put("a/b/c/d", b"1"))
    arun(storage.put("a/keep", b"2"))
    arun(storage.delete("a/b/c/d"))
    assert sorted(p.name for p in (tmp_path / "root" / "a").iterdir()) == ["keep"]
    arun(storage.put("a/keep", b"3"))  # a write of an existing key takes its lock
    assert sorted(p.name for p in (tmp_path / "root" / "a").iterdir()) == [".keep.lock", "keep"]
    arun(storage.delete("a/keep"))  # and delete removes it with the value
    assert list((tmp_path / "root").iterdir()) == []


def test_temp_and_foreign_files_are_not_listed(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path / "root")
    arun(storage.put("d/k", b"1"))
    d = tmp_path / "root" / "d"
    (d / ".k.0123abcd.tmp").write_bytes(b"half")
    (d / "has space").write_bytes(b"x")
    (d / "caf\u00e9").write_bytes(b"x")
    (tmp_path / "root" / ".hidden").mkdir()
    (tmp_path / "root" / ".hidden" / "k").write_bytes(b"x")
    assert arun(storage.list()) == ["d/k"]


def test_stale_temp_files_of_crashed_writers_are_swept(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    stale = root / "d" / ".k.deadbeef.tmp"
    fresh = root / "d" / ".k.cafebabe.tmp"
    stale.write_bytes(b"old")
    fresh.write_bytes(b"maybe still being written")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    arun(LocalFileStorage(root).put("d/k", b"1"))
    assert not stale.exists()
    assert fresh.exists()


def test_fifo_under_the_root_does_not_hang_get_and_is_never_replaced(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path / "root")
    arun(storage.put("x", b"1"))
    os.mkfifo(tmp_path / "root" / "pipe")
    for attempt in (storage.get("pipe"), storage.put("pipe", b"2")):
        with pytest.raises(StorageKeyInvalidError, match="FIFO"):
            arun(attempt)
    assert stat.S_ISFIFO(os.stat(tmp_path / "root" / "pipe").st_mode)
    assert arun(storage.list()) == ["x"]


def test_get_on_a_missing_root_is_none_and_creates_nothing(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path / "nowhere")
    assert arun(storage.get("k")) is None
    assert arun(storage.list()) == []
    arun(storage.delete("k"))
    assert not (tmp_path / "nowhere").exists()


async def _churn(storage: LocalFileStorage) -> None:
    for _ in range(50):
        await storage.list()
        await storage.get("a/b1/c/d1")
        await storage.put("a/b2/c/d2", b"z")
        with pytest.raises(StorageKeyInvalidError):
            await storage.put("a/link/x", b"z")


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_no_file_descriptor_leaks(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path / "root")

    async def body() -> None:
        for i in range(5):
            await storage.put(f"a/b{i}/c/d{i}", b"x")
        (tmp_path / "root" / "a" / "link").symlink_to(tmp_path, target_is_directory=True)
        for _ in range(50):
            await storage.list()
            await storage.list("a/b1/")
            await storage.get("a/b1/c/d1")
            await storage.get("a/missing/x")
            await storage.put("a/b1/c/d1", b"y")
            with pytest.raises(StorageKeyInvalidError):
                await storage.get("a/link/x")
            await storage.delete("a/b9/none")

    arun(body())  # warm up the worker thread pool so its fds are not counted
    before = len(os.listdir("/proc/self/fd"))
    arun(_churn(storage))
    assert len(os.listdir("/proc/self/fd")) <= before
