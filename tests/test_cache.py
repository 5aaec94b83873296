"""The compiled-machine cache sees every path a load looked for, found or not
(cli-and-harnesses.md §4; issue 8, defect 2): a machine file, a prompt file, an implied
`enter-STATE.md` or a config created after the cache was built is picked up without the
config being touched. Real `smllm` processes sharing one cache folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import smllm

PROMPT = 'params: { text: "Write a plan for the issue in PLAN.md, then fire planned." }'
ENTER = ["fire", "enter", "--param", "stateMachine=a", "--param", "issueId=GH-1"]


def _config(project: Path, text: str) -> int:
    """Write the project config; its mtime, to check later that nothing touched it."""
    path = project / ".smllm" / "config.toml"
    path.write_text(text)
    return path.stat().st_mtime_ns


def _untouched(project: Path, mtime: int) -> None:
    assert (project / ".smllm" / "config.toml").stat().st_mtime_ns == mtime


def test_a_machine_file_created_after_a_cfg3(project: Path, env: dict[str, str]) -> None:
    mtime = _config(project, '[machines]\nfiles = ["dev.smllm.yaml", "a.smllm.yaml"]\n')
    ran = smllm(["validate"], project, env)
    assert (ran.code, ran.err) == (1, "")
    assert ran.out == (
        ".smllm/config.toml:2:28: error: machines.files[1]: no machine file a.smllm.yaml "
        "(CFG-3)\n  hint: paths are relative to the config file's folder\n"
        "1 error, 0 warnings, 0 info\n"
    )
    ran = smllm(ENTER, project, env)
    assert ran.code == 1
    dev = (project / ".smllm" / "dev.smllm.yaml").read_text()
    (project / ".smllm" / "a.smllm.yaml").write_text(dev.replace("id: dev", "id: a"))
    ran = smllm(["validate"], project, env)
    assert (ran.code, ran.out, ran.err) == (0, "0 errors, 0 warnings, 0 info\n", "")
    ran = smllm(ENTER, project, env)
    assert (ran.code, ran.err) == (0, "")
    assert "Write a plan for the issue in PLAN.md, then fire planned." in ran.out
    # and gone again: the cache notices that as well
    (project / ".smllm" / "a.smllm.yaml").unlink()
    assert smllm(["validate"], project, env).code == 1
    _untouched(project, mtime)


def test_a_prompt_file_created_after_a_mch11(project: Path, env: dict[str, str]) -> None:
    dev = (project / ".smllm" / "dev.smllm.yaml").read_text()
    assert PROMPT in dev
    (project / ".smllm" / "a.smllm.yaml").write_text(
        dev.replace("id: dev", "id: a").replace(PROMPT, "params: { file: plan.md }")
    )
    mtime = _config(project, '[machines]\nfiles = ["a.smllm.yaml"]\n')
    ran = smllm(["validate"], project, env)
    assert (ran.code, ran.err) == (1, "")
    assert ran.out == (
        ".smllm/a.smllm.yaml:22:44: error: states.PLAN.entry.params.file: no prompt file "
        "plan.md (MCH-11)\n  hint: paths are relative to the machine file's folder\n"
        "1 error, 0 warnings, 0 info\n"
    )
    (project / ".smllm" / "plan.md").write_text("Plan it from the file.\n")
    ran = smllm(["validate"], project, env)
    assert (ran.code, ran.out, ran.err) == (0, "0 errors, 0 warnings, 0 info\n", "")
    ran = smllm(ENTER, project, env)
    assert (ran.code, ran.err) == (0, "")
    assert "<instructions>\nPlan it from the file.\n</instructions>" in ran.out
    _untouched(project, mtime)


def test_an_enter_state_file_created_after_an_agt5(project: Path, env: dict[str, str]) -> None:
    dev = (project / ".smllm" / "dev.smllm.yaml").read_text()
    entry = f"    entry: {{ type: prompt, {PROMPT} }}\n"
    assert entry in dev
    (project / ".smllm" / "a.smllm.yaml").write_text(
        dev.replace("id: dev", "id: a").replace(entry, "")
    )
    mtime = _config(project, '[machines]\nfiles = ["a.smllm.yaml"]\n')
    ran = smllm(["validate", "--info"], project, env)
    assert (ran.code, ran.err) == (0, "")
    assert ran.out == (
        ".smllm/a.smllm.yaml:20:3: info: states.PLAN: the agent gets no instructions in PLAN "
        "(AGT-5)\n  hint: add a prompt action or enter-STATE.md\n"
        "0 errors, 0 warnings, 1 info\n"
    )
    (project / ".smllm" / "enter-PLAN.md").write_text("Plan it from enter-PLAN.md.\n")
    ran = smllm(["validate", "--info"], project, env)
    assert (ran.code, ran.out, ran.err) == (0, "0 errors, 0 warnings, 0 info\n", "")
    ran = smllm(ENTER, project, env)
    assert (ran.code, ran.err) == (0, "")
    assert "<instructions>\nPlan it from enter-PLAN.md.\n</instructions>" in ran.out
    _untouched(project, mtime)


def test_an_idle_file_created_after_a_cfg9(project: Path, env: dict[str, str]) -> None:
    mtime = _config(
        project, '[machines]\nfiles = ["dev.smllm.yaml"]\n[idle]\non-enter = { file = "idle.md" }\n'
    )
    ran = smllm(["validate"], project, env)
    assert (ran.code, ran.err) == (1, "")
    assert ran.out.startswith(".smllm/config.toml:4:21: error: idle.on-enter.file: no prompt ")
    (project / ".smllm" / "idle.md").write_text("Pick a machine.\n")
    ran = smllm(["validate"], project, env)
    assert (ran.code, ran.out, ran.err) == (0, "0 errors, 0 warnings, 0 info\n", "")
    ran = smllm(["session", "new"], project, env)
    assert "<instructions>\nPick a machine.\n</instructions>" in ran.out
    _untouched(project, mtime)


def test_a_user_config_that_comes_and_goes(project: Path, env: dict[str, str]) -> None:
    # the user config is found afresh on each call; a session's recorded configs are reloaded
    # as they are now: one that vanished is skipped, and it counts again when it is back
    user = Path(env["XDG_CONFIG_HOME"]) / "smllm"
    user.mkdir(parents=True)
    dev = (project / ".smllm" / "dev.smllm.yaml").read_text()
    (user / "u.smllm.yaml").write_text(dev.replace("id: dev", "id: u"))
    ran = smllm(["session", "new"], project, env)
    assert "- dev:" in ran.out and "- u:" not in ran.out
    (user / "config.toml").write_text('[machines]\nfiles = ["u.smllm.yaml"]\n')
    ran = smllm(["session", "new", "--json"], project, env)
    key = json.loads(ran.out)["session"]
    ran = smllm(["session", "show", key], project, env)
    assert "- u:" in ran.out and "- dev:" in ran.out
    (user / "config.toml").rename(user / "config.off")
    ran = smllm(["session", "show", key], project, env)
    assert "- u:" not in ran.out and "- dev:" in ran.out
    (user / "config.off").rename(user / "config.toml")
    ran = smllm(["session", "show", key], project, env)
    assert "- u:" in ran.out and "- dev:" in ran.out


def _cache_file(env: dict[str, str]) -> Path:
    (path,) = Path(env["XDG_CACHE_HOME"], "smllm").glob("machines-*.pickle")
    return path


def _read_cache(path: Path) -> tuple[dict[str, Any], Any]:
    """A cache file's marshal header and its unpickled machines."""
    import marshal
    import pickle

    from smllm.machine.configs import cache

    data = path.read_bytes()
    assert data.startswith(cache.MAGIC)
    start = len(cache.MAGIC) + 4
    end = start + int.from_bytes(data[len(cache.MAGIC) : start], "little")
    return marshal.loads(data[start:end]), pickle.loads(data[end:])


def _write_cache(path: Path, header: dict[str, Any], loaded: Any) -> None:
    import marshal
    import pickle

    from smllm.machine.configs import cache

    head = marshal.dumps(header)
    path.write_bytes(cache.MAGIC + len(head).to_bytes(4, "little") + head + pickle.dumps(loaded))


def test_a_cache_of_another_format_is_never_read(project: Path, env: dict[str, str]) -> None:
    # format 7 (1137ab3): caches written before it lack the missing machine files in their key;
    # format 8 (b49af39): before it, a config with an error left its other files unchecked;
    # format 9: before it, CFG-5 withdrew no machine; format 10: Loaded.withdrawn; format 11:
    # a marshal header (freshness and the summary) before the pickled machines.
    # A cache of an older format that is otherwise fresh must be rebuilt
    import pickle

    from smllm.machine.configs import cache

    config = str(project / ".smllm" / "config.toml")
    cache._MEMO.clear()
    first = cache.load_cached((config,))
    path = _cache_file(env)
    header, loaded = _read_cache(path)
    assert loaded == first
    assert header["format"] == cache.CACHE_FORMAT == 11
    stale = first._replace(machines={})
    for older in (6, 7, 8, 9, 10):
        _write_cache(path, {**header, "format": older}, stale)
        cache._MEMO.clear()
        assert list(cache.load_cached((config,)).machines) == ["dev"]
    # format 10 and older were one pickled dict: never read
    path.write_bytes(pickle.dumps({**header, "format": 11, "loaded": stale}))
    cache._MEMO.clear()
    assert list(cache.load_cached((config,)).machines) == ["dev"]
    _write_cache(path, header, stale)  # the same, in format 11: read as it is
    cache._MEMO.clear()
    assert cache.load_cached((config,)).machines == {}
    cache._MEMO.clear()


def test_the_summary_is_read_from_the_header_alone(project: Path, env: dict[str, str]) -> None:
    """The machines' summary (kind and store of each) comes from the cache's header, equal to
    the machines' own; the machines in the file are not read for it."""
    from smllm.machine.configs import cache
    from smllm.machine.configs.cache import summary_of
    from smllm.machine.summary import MachineKind, StoreSpec

    config = str(project / ".smllm" / "config.toml")
    cache._MEMO.clear()
    loaded = cache.load_cached((config,))
    cache._MEMO.clear()
    summary = cache.summary_cached((config,))
    assert summary == summary_of(loaded)
    spec = StoreSpec("dir", str(project / ".smllm" / "state"), "default")
    assert summary.configs == (config,)
    assert summary.machines == {"dev": MachineKind("issue")}
    assert (summary.stores, summary.config_stores) == ({"dev": spec}, {config: spec})
    assert cache._MEMO == {}  # nothing unpickled
    path = _cache_file(env)
    header, _ = _read_cache(path)
    _write_cache(path, header, "not machines")  # the header alone answers
    assert cache.summary_cached((config,)) == summary
    cache._MEMO.clear()


@pytest.mark.parametrize("damage", ["header", "summary", "truncated", "empty", "magic"])
def test_a_damaged_header_is_rebuilt(project: Path, env: dict[str, str], damage: str) -> None:
    import marshal

    from smllm.machine.configs import cache
    from smllm.machine.configs.cache import summary_of

    config = str(project / ".smllm" / "config.toml")
    cache._MEMO.clear()
    loaded = cache.load_cached((config,))
    path = _cache_file(env)
    header, _ = _read_cache(path)
    data = path.read_bytes()
    start = len(cache.MAGIC) + 4
    if damage == "header":
        path.write_bytes(data[:start] + b"\xff" * 40 + data[start + 40 :])
    elif damage == "summary":
        _write_cache(path, {**header, "summary": ("x",)}, loaded)  # the machines answer
    elif damage == "truncated":
        path.write_bytes(data[: start + len(marshal.dumps(header)) // 2])
    elif damage == "magic":  # a sound header and stale machines, after another file's start
        _write_cache(path, header, loaded._replace(machines={}))
        path.write_bytes(b"x" * len(cache.MAGIC) + path.read_bytes()[len(cache.MAGIC) :])
    else:
        path.write_bytes(b"")
    cache._MEMO.clear()
    assert cache.summary_cached((config,)) == summary_of(loaded)
    cache._MEMO.clear()
    assert cache.load_cached((config,)) == loaded
    assert _read_cache(path)[1] == loaded
    cache._MEMO.clear()


def test_the_cache_is_the_owners_alone(project: Path, env: dict[str, str]) -> None:
    """A config's `[state] url` may carry a password, which the compiled cache keeps: the
    cache file is readable by its owner only, whatever the umask."""
    from smllm.machine.configs import cache

    config = project / ".smllm" / "config.toml"
    config.write_text(config.read_text() + '[state]\nurl = "postgresql://u:hunter2@db/x"\n')
    cache._MEMO.clear()
    old = os.umask(0o022)
    try:
        cache.load_cached((str(config),))
    finally:
        os.umask(old)
    path = _cache_file(env)
    assert b"hunter2" in path.read_bytes()  # the test reads the file that holds it
    assert path.stat().st_mode & 0o777 == 0o600
