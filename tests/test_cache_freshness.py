"""Each freshness rule of the compiled-machine cache, directly (cli-and-harnesses.md §4; issue 12
§1.3): loaded configs are reused until a file the load read or looked for changed size or
mtime, appeared, vanished, or has an mtime within 2 s of the cache's build time (then its
content is compared).

Every rule is checked at the cache's own API (`load_cached`), both from this process's memo
and from the cache file a new process would read, and the two that a size-only check misses
also through the real CLI. File times are set with `os.utime`, so "older than 2 s" needs no
sleep.

Then the cache's helpers, exactly: where the cache lives and its file's name (FNV-1a of the
configs), a file's `_signature` (old, new, missing) and each rule of `_fresh` at its own
level, the memo of a file read from disk, and findings named by absolute path.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import smllm, write_machine

from smllm.machine.configs import cache

OLD = "Work on an issue, from a plan to a change."
SAME_SIZE = "Work on an issue, from a plan to a chanGE."
LONGER = "Work on an issue, from a plan to a bigger change."
S = 1_000_000_000  # ns


@pytest.fixture(autouse=True)
def _fresh_memo() -> Iterator[None]:
    cache._MEMO.clear()
    yield
    cache._MEMO.clear()


def config_of(project: Path) -> tuple[str, ...]:
    return (str(project / ".smllm" / "config.toml"),)


def load(project: Path, via: str) -> str | None:
    """The dev machine's description as the cache gives it now: from this process's memo, or
    (`disk`) from the cache file only, as a new process would."""
    if via == "disk":
        cache._MEMO.clear()
    machine = cache.load_cached(config_of(project)).machines.get("dev")
    return machine.description if machine is not None else None


def set_mtime(path: Path, mtime_ns: int) -> None:
    os.utime(path, ns=(mtime_ns, mtime_ns))


def edit(path: Path, old: str, new: str, mtime_ns: int | None) -> None:
    """Replace OLD by NEW in the file; then set its mtime to MTIME_NS (None: leave the new
    one)."""
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    if mtime_ns is not None:
        set_mtime(path, mtime_ns)


def dev_file(project: Path) -> Path:
    return project / ".smllm" / "dev.smllm.yaml"


def aged(project: Path, seconds: float) -> int:
    """Every file of the project `seconds` old; the dev file's mtime."""
    mtime = time.time_ns() - int(seconds * S)
    for path in (project / ".smllm").iterdir():
        set_mtime(path, mtime)
    return mtime


VIA = ["memo", "disk"]


def test_a_fresh_cache_is_reused(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other side of every rule: nothing changed, nothing reloaded (no config is read)."""
    aged(project, 100)
    first = cache.load_cached(config_of(project))
    from smllm.machine.configs import config

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("the configs were loaded again")

    monkeypatch.setattr(config, "load_configs", no_load)
    assert cache.load_cached(config_of(project)) is first
    cache._MEMO.clear()
    assert cache.load_cached(config_of(project)).machines["dev"].description == OLD


@pytest.mark.parametrize("via", VIA)
def test_a_size_change_with_the_same_mtime(project: Path, via: str) -> None:
    mtime = aged(project, 100)
    assert load(project, via) == OLD
    edit(dev_file(project), OLD, LONGER, mtime)
    assert dev_file(project).stat().st_mtime_ns == mtime
    assert load(project, via) == LONGER


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("moved", [+50, -50])
def test_a_same_size_edit_of_an_old_file_with_a_new_mtime(
    project: Path, via: str, moved: int
) -> None:
    """The file is 100 s older than the build (so not compared by content); the edit keeps its
    size and moves its mtime 50 s later, or earlier (a file restored from a backup)."""
    mtime = aged(project, 100)
    assert load(project, via) == OLD
    size = dev_file(project).stat().st_size
    edit(dev_file(project), OLD, SAME_SIZE, mtime + moved * S)
    assert dev_file(project).stat().st_size == size
    assert load(project, via) == SAME_SIZE


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("age", [0, 1.5, -60])
def test_a_same_size_edit_within_2_s_of_the_build(project: Path, via: str, age: float) -> None:
    """The file's mtime is within 2 s of the build (just written, 1.5 s old, or in the future
    as after a clock step): an edit that keeps both its size and its mtime is seen all the
    same, by its content."""
    mtime = aged(project, age)
    assert load(project, via) == OLD
    edit(dev_file(project), OLD, SAME_SIZE, mtime)
    assert dev_file(project).stat().st_mtime_ns == mtime
    assert load(project, via) == SAME_SIZE


@pytest.mark.parametrize("via", VIA)
def test_the_same_edit_of_an_older_file_goes_unseen(project: Path, via: str) -> None:
    """The rules' trade-off, pinned so that the tests above show what each rule catches: a
    file older than 2 s whose size and mtime are both kept is not read again."""
    mtime = aged(project, 3)
    assert load(project, via) == OLD
    edit(dev_file(project), OLD, SAME_SIZE, mtime)
    assert load(project, via) == OLD


def test_the_2_s_bound(tmp_path: Path) -> None:
    """`_signature` keeps a file's bytes when its mtime is at most 2 s before the build."""
    path = tmp_path / "a.smllm.yaml"
    path.write_bytes(b"id: a\n")
    built = time.time_ns()
    for offset, racy in [
        (0, True),
        (-cache.RACY_NS + 1, True),
        (-cache.RACY_NS, True),
        (-cache.RACY_NS - 1, False),
        (-10 * S, False),
        (+60 * S, True),
    ]:
        set_mtime(path, built + offset)
        want = b"id: a\n" if racy else False
        assert cache._signature(str(path), built) == (str(path), 6, built + offset, want), offset
    assert cache.RACY_NS == 2 * S


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("age", [100, 0])
def test_a_file_that_appeared(project: Path, via: str, age: float) -> None:
    """A machine file the config lists but that was missing at the build."""
    write_machine(project, "later", "")
    (project / ".smllm" / "later.smllm.yaml").unlink()
    aged(project, age)
    before = cache.load_cached(config_of(project))
    assert [f.rule for f in before.findings if f.level == "error"] == ["CFG-3"]
    assert before.machines == {}  # a config with an error loads none of its machines
    dev = dev_file(project).read_text().replace("id: dev", "id: later")
    (project / ".smllm" / "later.smllm.yaml").write_text(dev)
    set_mtime(project / ".smllm" / "later.smllm.yaml", time.time_ns() - 100 * S)
    if via == "disk":
        cache._MEMO.clear()
    assert cache.load_cached(config_of(project)).machines.keys() == {"dev", "later"}


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("age", [100, 0])
def test_a_file_that_vanished(project: Path, via: str, age: float) -> None:
    """A prompt file the machine reads, gone after the build."""
    edit(
        dev_file(project),
        'params: { text: "Make the change that PLAN.md describes, then fire done." }',
        "params: { file: work.md }",
        None,
    )
    (project / ".smllm" / "work.md").write_text("Work from the file.\n")
    aged(project, age)
    loaded = cache.load_cached(config_of(project))
    assert [f.text() for f in loaded.findings if f.level == "error"] == []
    assert "dev" in loaded.machines
    (project / ".smllm" / "work.md").unlink()
    if via == "disk":
        cache._MEMO.clear()
    loaded = cache.load_cached(config_of(project))
    errors = [f for f in loaded.findings if f.level == "error"]
    assert [f.rule for f in errors] == ["MCH-11"], errors
    assert "dev" not in loaded.machines


# -- through the CLI: a new process each call, so the cache file is what it reads ---------------

PROMPT = "Write a plan for the issue in PLAN.md, then fire planned."
PROMPT_2 = "Write a plan for the issue in PLAN.md, then fire PLANNED."


def _enter(project: Path, env: dict[str, str], ref: str) -> str:
    ran = smllm(
        ["fire", "enter", "--param", "stateMachine=dev", "--param", f"issueId={ref}"], project, env
    )
    assert (ran.code, ran.err) == (0, ""), ran.out
    return ran.out


@pytest.mark.parametrize("age", [100, -1])
def test_the_cli_sees_a_same_size_edit(project: Path, env: dict[str, str], age: float) -> None:
    """An old file edited with a new mtime (the size-only bug of issue 12 §1.3), and a file
    edited within 2 s of the build with its mtime kept (1 s ahead of the clock, so that a slow
    process start can't take the build past the 2 s)."""
    mtime = aged(project, age)
    assert f"<instructions>\n{PROMPT}\n</instructions>" in _enter(project, env, "GH-1")
    edit(dev_file(project), PROMPT, PROMPT_2, mtime + (S if age > 0 else 0))
    assert f"<instructions>\n{PROMPT_2}\n</instructions>" in _enter(project, env, "GH-2")


# --- the cache's helpers, exactly: its folder, its file's name, _signature and _fresh -------------


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
    assert cache._fresh(sigs)
    # a same-size edit keeping the mtime, after a missing file: still seen
    mtime = b.stat().st_mtime_ns
    b.write_bytes(b"BBBB")
    os.utime(b, ns=(mtime, mtime))
    assert not cache._fresh(sigs)
    b.write_bytes(b"bbbb")
    os.utime(b, ns=(mtime, mtime))
    assert cache._fresh(sigs)
    # the missing file appears
    gone.write_bytes(b"")
    assert not cache._fresh(sigs)
    gone.unlink()
    # a file vanishes
    a.unlink()
    assert not cache._fresh(sigs)


def test_fresh_without_content(tmp_path: Path) -> None:
    a = tmp_path / "a"
    a.write_bytes(b"aaaa")
    built = time.time_ns()
    os.utime(a, ns=(built - 10 * S, built - 10 * S))
    sigs = [sig(a, built)]
    assert sigs[0][3] is False and cache._fresh(sigs)
    os.utime(a, ns=(built - 9 * S, built - 9 * S))
    assert not cache._fresh(sigs)
    a.write_bytes(b"aaaaa")
    os.utime(a, ns=(built - 10 * S, built - 10 * S))
    assert not cache._fresh(sigs)


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
