"""The in-memory engine worlds that the engine's test files share (a `World` over
helpers/memory_world.py's reader and the scripted host), and the small helpers that fire calls
into them and read their replies."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from helpers.memory_world import DEV_MACHINE, World, write_project
from helpers.scripted_host import ScriptedHost

from smllm.engine.fire import fire as engine_fire
from smllm.engine.records import Instance
from smllm.machine.configs.config import load_configs
from smllm.machine.model import IdlePrompt
from smllm.text.block import render

#: tests/machines: the fixture machines
MACHINES = Path(__file__).resolve().parents[1] / "machines"
FALLBACK = MACHINES / "fallback.smllm.yaml"
T0 = "2026-01-01T00:00:00.000000Z"
Scripted = World[ScriptedHost]


def dev_world(tmp_path: Path) -> Scripted:
    """A world over the dev example and the fallback fixture machine (the `world` fixture of
    most engine test files)."""
    cwd, config = write_project(tmp_path, DEV_MACHINE, FALLBACK)
    return World(load_configs((config,)), ScriptedHost(seed=1), cwd=cwd)


def idle_world(tmp_path: Path, idle: IdlePrompt) -> Scripted:
    """The dev world with the config's idle prompt (`[idle] on-enter`) set to `idle`."""
    cwd, config = write_project(tmp_path, DEV_MACHINE, FALLBACK)
    loaded = load_configs((config,))._replace(idle=idle)
    return World(loaded, ScriptedHost(seed=1), cwd=cwd)


def fire(world: Scripted, key: str, event: str, *params: tuple[str, Any]) -> None:
    """Fire through the world (applying what the engine returns), and check it was accepted."""
    fired = world.fire(key, event, *params)
    assert fired.committed.ok, fired.committed.reply


def enter(world: Scripted, key: str, ref: str, machine: str = "dev") -> None:
    """Enter `ref` of `machine` (dev: an issueId, else a taskId), accepted."""
    param = "issueId" if machine == "dev" else "taskId"
    fire(world, key, "enter", ("stateMachine", machine), (param, ref))


def machines_world(
    tmp_path: Path, *texts: str, files: tuple[Path, ...] = (), dirs: tuple[str, ...] = ()
) -> Scripted:
    """A world over the machines of `texts` (YAML) and `files`, in that order; `dirs`: folders
    made beside them."""
    src = tmp_path / "src"
    src.mkdir(parents=True)
    paths = []
    for text in texts:
        path = src / (text.split("\n", 1)[0].removeprefix("id: ") + ".smllm.yaml")
        path.write_text(text)
        paths.append(path)
    cwd, config = write_project(tmp_path, *paths, *files)
    for name in dirs:
        (Path(config).parent / name).mkdir()
    loaded = load_configs((config,))
    assert [f for f in loaded.findings if f.level == "error"] == [], loaded.findings
    return World(loaded, ScriptedHost(seed=1), cwd=cwd)


def try_fire(world: Scripted, key: str | None, event: str, *params: tuple[str, Any]) -> Any:
    """The engine's outcome of a call, not applied to the world."""
    return engine_fire(world.loaded, world.call(key, event, *params), world.reader, world.host)


def lines(reply: Any) -> list[str]:
    return render(reply).split("\n")


def inst(**changes: Any) -> Instance:
    """Issue GH-1 of dev, active in PLAN and held by session k (version 1)."""
    i = Instance("i-1", "dev", "GH-1", "PLAN", "active", "k", None, 1, {"PLAN": 1}, None, T0, T0)
    return i._replace(**changes)


def refused(out: Any) -> str:
    """The error of a refusal that wrote nothing, after checking that it wrote nothing."""
    assert (out.ok, out.instances, out.session, out.audit) == (False, (), None, ())
    text = render(out.reply)
    errors = [line.removeprefix("error: ") for line in text.split("\n") if line.startswith("error")]
    assert len(errors) == 1, text
    return errors[0]


def calls(world: Scripted) -> list[tuple[str, str, str, str, str]]:
    """The commands run since the last look: (run, cwd below the project, SMLLM_STATE,
    SMLLM_FROM>SMLLM_TO or "-" when unset, SMLLM_REF); then forgotten."""
    out = []
    for c in world.host.calls:
        assert isinstance(c.command.run, str)
        ends = f"{c.env['SMLLM_FROM']}>{c.env['SMLLM_TO']}" if "SMLLM_FROM" in c.env else "-"
        cwd = c.cwd.removeprefix(world.cwd).removeprefix("/")
        out.append((c.command.run, cwd, c.env["SMLLM_STATE"], ends, c.env["SMLLM_REF"]))
    world.host.calls.clear()
    return out


def fired(world: Scripted, key: str, event: str, *params: tuple[str, Any]) -> Any:
    """The committed outcome of an accepted call: (its history record, its reply's lines)."""
    out = world.fire(key, event, *params).committed
    assert out.ok, render(out.reply)
    (write,) = out.instances
    return write.history, lines(out.reply)


def fix_world(tmp_path: Path) -> tuple[Scripted, str, Path]:
    """The fix machine (prompt files, enter-REPRO.md, shared actions, host events); the
    folder its files were copied to."""
    smllm = tmp_path / "project" / ".smllm"
    shutil.copytree(MACHINES / "fix", smllm / "fix")
    (smllm / "config.toml").write_text('[machines]\nfiles = ["fix/fix.smllm.yaml"]\n')
    loaded = load_configs((str(smllm / "config.toml"),))
    assert loaded.findings == ()
    world = World(loaded, ScriptedHost(seed=1), cwd=str(tmp_path / "project"))
    return world, world.new_session().key, smllm / "fix"


def events(out: Any) -> list[str]:
    """The items of a reply's events list."""
    text = lines(out.reply)
    return text[text.index("<events>") + 1 : text.index("</events>")]


def middle(text: str) -> list[str]:
    """A reply's lines after its header, up to the list of state machines."""
    got = text.split("\n")
    return got[2 : got.index("State machines:")]
