"""The compiled cache's helpers asserted exactly, written to kill mutants that scripts/mutation
found surviving in src/smllm/machine/configs/cache.py (issue 12 §4): where the cache lives,
its file name, and each freshness rule of `_fresh` and `_signature` at their own level."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from smllm.machine.configs import cache

S = 1_000_000_000


@pytest.fixture(autouse=True)
def _fresh_memo() -> Iterator[None]:
    cache._MEMO.clear()
    yield
    cache._MEMO.clear()


def test_fnv1a_standard_vectors() -> None:
    # the published FNV-1a 32-bit test vectors
    assert cache._fnv1a(b"") == 0x811C9DC5
    assert cache._fnv1a(b"a") == 0xE40C292C
    assert cache._fnv1a(b"foobar") == 0xBF9CF968


def test_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == str(tmp_path / "xdg" / "smllm")
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == str(tmp_path / "home" / ".cache" / "smllm")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == str(tmp_path / "home" / ".cache" / "smllm")


def test_the_cache_file_is_named_by_the_configs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    key = b"/a/config.toml\0/b/config.toml"
    name = f"machines-{cache._fnv1a(key):08x}-{len(key)}.pickle"
    assert cache._path(("/a/config.toml", "/b/config.toml")) == str(tmp_path / "smllm" / name)
    assert name == "machines-ce601428-29.pickle"
    # a path that isn't UTF-8 (surrogate-escaped by the OS layer) still has a cache file
    odd = "/x/\udcff"
    raw = b"/x/\xff"
    expected = f"machines-{cache._fnv1a(raw):08x}-4.pickle"
    assert cache._path((odd,)) == str(tmp_path / "smllm" / expected)


def sig(path: Path, built_ns: int) -> cache.Signature:
    return cache._signature(str(path), built_ns)


def test_signature_of_old_new_and_missing_files(tmp_path: Path) -> None:
    old, new, gone = tmp_path / "old", tmp_path / "new", tmp_path / "gone"
    old.write_bytes(b"12345")
    new.write_bytes(b"abc")
    built = time.time_ns()
    os.utime(old, ns=(built - 3 * S, built - 3 * S))
    os.utime(new, ns=(built - 2 * S, built - 2 * S))  # exactly at the 2 s bound: compared
    assert sig(old, built) == (str(old), 5, built - 3 * S, False)
    assert sig(new, built) == (str(new), 3, built - 2 * S, b"abc")
    assert sig(gone, built) == (str(gone), None, None, False)
    assert sig(tmp_path, built) == (str(tmp_path), *sig(tmp_path, built)[1:3], False)
    assert cache._signature("a\0b", built) == ("a\0b", None, None, False)


def test_fresh_rules(tmp_path: Path) -> None:
    a, b, gone = tmp_path / "a", tmp_path / "b", tmp_path / "gone"
    a.write_bytes(b"aaaa")
    b.write_bytes(b"bbbb")
    built = time.time_ns()
    sigs = [sig(gone, built), sig(a, built), sig(b, built)]
    assert sigs[1][3] == b"aaaa"  # just written: compared by content
    assert cache._fresh(sigs, built)
    # a same-size edit keeping the mtime, after a missing file: still seen
    mtime = b.stat().st_mtime_ns
    b.write_bytes(b"BBBB")
    os.utime(b, ns=(mtime, mtime))
    assert not cache._fresh(sigs, built)
    b.write_bytes(b"bbbb")
    os.utime(b, ns=(mtime, mtime))
    assert cache._fresh(sigs, built)
    # the missing file appears
    gone.write_bytes(b"")
    assert not cache._fresh(sigs, built)
    gone.unlink()
    # a file vanishes
    a.unlink()
    assert not cache._fresh(sigs, built)


def test_fresh_without_content(tmp_path: Path) -> None:
    a = tmp_path / "a"
    a.write_bytes(b"aaaa")
    built = time.time_ns()
    os.utime(a, ns=(built - 10 * S, built - 10 * S))
    sigs = [sig(a, built)]
    assert sigs[0][3] is False and cache._fresh(sigs, built)
    os.utime(a, ns=(built - 9 * S, built - 9 * S))
    assert not cache._fresh(sigs, built)
    a.write_bytes(b"aaaaa")
    os.utime(a, ns=(built - 10 * S, built - 10 * S))
    assert not cache._fresh(sigs, built)


def test_a_file_read_from_disk_is_memoised(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    config = tmp_path / "p" / "config.toml"
    config.parent.mkdir()
    config.write_text("[machines]\nfiles = []\n")
    old = time.time_ns() - 10 * S
    os.utime(config, ns=(old, old))
    built = cache.load_cached((str(config),))
    cache._MEMO.clear()
    from_disk = cache.load_cached((str(config),))
    assert from_disk is not built and from_disk.configs == (str(config),)
    assert cache.load_cached((str(config),)) is from_disk  # the second read is the memo's


def test_findings_name_files_by_absolute_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The cache is shared by every folder: a finding's file is never relative to the cwd."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    project = tmp_path / "p"
    (project / ".smllm").mkdir(parents=True)
    config = project / ".smllm" / "config.toml"
    config.write_text('[machines]\nfiles = ["missing.smllm.yaml"]\n')
    monkeypatch.chdir(project)
    loaded = cache.load_cached((str(config),))
    assert [(f.rule, f.file) for f in loaded.findings] == [("CFG-3", str(config))]


def test_a_second_cache_file_beside_the_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    configs = []
    for name in ("a", "b"):
        config = tmp_path / name / "config.toml"
        config.parent.mkdir()
        config.write_text("[machines]\nfiles = []\n")
        configs.append((str(config),))
    for config in configs:
        cache.load_cached(config)
    assert sorted(p.name for p in (tmp_path / "cache" / "smllm").iterdir()) == sorted(
        Path(cache._path(c)).name for c in configs
    )
