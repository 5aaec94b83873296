"""Issue 20 §1 with the four real clients, offline: a guard that runs longer than the client
will wait for the MCP tool call. Each run is a fresh project and HOME holding the `slow`
machine (tests/e2e/longcalls.py), `smllm harness install NAME`, the client driven by the
scripted fake model:

1. gives up: the client's limit lowered to LIMIT s in the file the install wrote, the guard
   GUARD s, progress off (SMLLM_PROGRESS_SECONDS=3600 reaches `smllm mcp`): the model gets the
   client's own timeout text while the guard still runs; the instance moves anyway; the next
   call's reply is the note line, then the view; the one after is the view alone. Claude Code
   and Codex also with progress every second: per the research it resets neither's limit;
2. progress keeps it alive (Copilot CLI and OpenCode, whose limits progress resets): the same
   lowered limit and guard, progress every second: the call succeeds, no note;
3. the installed default: each client's key holds 900 s (in its unit), or the machines'
   longest command plus a minute; OpenCode, whose own default is 60 s, waits out a 70 s guard
   with its installed limit untouched and progress off.

Needs the pinned clients (`npm ci --prefix tests/clients`, scripts/test runs it) and Node;
without them the tests fail, saying so."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import smllm, write_machine
from e2e import clients
from e2e.fake_model import Request, Step, split_texts
from e2e.longcalls import (
    FLOOR_S,
    INSTALLED_S,
    LIMITS,
    NOTE,
    PROMPT,
    SEEN,
    Hold,
    HoldingModel,
    Texts,
    forward_to_codex_server,
    gives_up_steps,
    installed_entry,
    instance,
    kept_steps,
    last_tool_result,
    set_limit,
    slow_machine,
    state_of,
    timeout_text,
)

NAMES = ["claude", "codex", "copilot", "opencode"]
LIMIT = 4  # seconds: each client's lowered limit
GUARD = 8  # seconds the guard sleeps under the lowered limit
#: a guard past OpenCode's own 60 s default, under the limit the install wrote
PAST_DEFAULT = 70
OFF = "3600"  # SMLLM_PROGRESS_SECONDS: no progress within any of these calls
EVERY_SECOND = "1"
#: extra time for the client's own steps around the guard (the clients take 2 – 15 s)
SETTLE = 120.0


@dataclass
class Played:
    """What one client's run left: the model's requests, the store, the installed entry."""

    name: str
    box: clients.Sandbox
    model: HoldingModel
    client: clients.Client
    installed: dict[str, Any]  # smllm's MCP entry as the install wrote it
    texts: Texts  # for the session's key
    key: str
    instance: dict[str, Any]  # `instance show T-1 --json` after the run
    seen: str  # the SMLLM_PROGRESS_SECONDS the guard was run with

    def request(self, step: int) -> Request:
        return next(r for r in self.model.requests if r.step == step)

    def result(self, step: int) -> list[str]:
        """The strings of the last tool result the request of STEP carries."""
        return last_tool_result(self.request(step).body)


def play(
    name: str,
    root: Path,
    steps: Callable[[Texts], list[Step]],
    guard: int,
    progress: str,
    limit: int | None,
    hold: int | None = None,
) -> Played:
    """Client NAME through STEPS with a guard of GUARD s, SMLLM_PROGRESS_SECONDS=PROGRESS in
    its environment (forwarded to Codex's server), its limit lowered to LIMIT s (None: as
    installed); step HOLD waits until the instance moved."""
    (root / "run").mkdir()
    (root / "twin").mkdir()
    box = clients.sandbox(root / "run")
    box = dataclasses.replace(box, env={**box.env, "SMLLM_PROGRESS_SECONDS": progress})
    write_machine(box.project, "slow", slow_machine(guard))
    texts = Texts.of_twin(root / "twin", guard)
    model = HoldingModel(root / "requests")
    with model:
        client = clients.CLIENT_TYPES[name](box, model.url)
        model.steps = steps(texts)
        if hold is not None:
            moved = Hold(lambda: state_of(box) == "DONE", "T-1's move to DONE")
            model.holds[hold] = moved
        try:
            installed = smllm(["harness", "install", client.harness], box.project, box.env)
            assert installed.code == 0, installed.err
            entry = installed_entry(box.project, name)
            client.prepare()
            if name == "codex":
                forward_to_codex_server(box.project, "SMLLM_PROGRESS_SECONDS")
            if limit is not None:
                set_limit(box.project, name, limit)
            ran = client.run(PROMPT, resume=False)
            assert ran.code == 0, ran.describe()
            settle(model, client, len(model.steps), guard, ran)
        finally:
            client.close()
    listed = json.loads(smllm(["session", "list", "--json"], box.project, box.env).out)
    keys = [s["key"] for s in listed["sessions"]]
    assert len(keys) == 1, listed
    seen = (box.project / SEEN).read_text()
    return Played(
        name=name,
        box=box,
        model=model,
        client=client,
        installed=entry,
        texts=texts.for_key(keys[0]),
        key=keys[0],
        instance=instance(box),
        seen=seen,
    )


def settle(
    model: HoldingModel, client: clients.Client, steps: int, guard: int, ran: clients.Ran
) -> None:
    """Wait for the run's last step (OpenCode's server goes on after `run --attach` exits),
    then for the client to finish its stop; the model must have stayed on script."""
    done = model.wait(steps, guard + SETTLE)
    assert done, f"{client.name} hung at step {model.taken}\n{ran.describe()}"
    client.settle()
    where = f"(requests in {model.logdir})\n{ran.describe()}"
    assert model.mismatches == [], f"{client.name} went off script: {model.mismatches} {where}"
    # every main turn took its step in order: no extra turn, so the last stop was allowed
    assert [r.step for r in model.main_requests()] == list(range(steps)), where


def assert_moved(p: Played) -> None:
    """T-1 is DONE, by the agent's `checked` in this session: the engine's commit stood."""
    shown = p.instance
    assert (shown["instance"]["state"], shown["instance"]["status"]) == ("DONE", "completed")
    last = shown["history"][-1]
    got = (last["session"], last["source"], last["event"], last["from"], last["to"])
    assert got == (p.key, "agent", "checked", "WORK", "DONE"), last
    assert [h["event"] for h in shown["history"]] == ["enter", "checked"]


def noted(p: Played) -> list[int | None]:
    """The steps whose request's last tool result carries the note line; it is never in a
    request's other texts (the client's context, its prompts, the model's texts)."""
    for r in p.model.requests:
        assert not any(NOTE in s for s in split_texts(r.body)[1]), r.number
    return [
        r.step for r in p.model.main_requests() if any(NOTE in s for s in last_tool_result(r.body))
    ]


GIVES_UP = [(name, OFF) for name in NAMES] + [("claude", EVERY_SECOND), ("codex", EVERY_SECOND)]


@pytest.mark.parametrize(("name", "progress"), GIVES_UP)
def test_the_client_gives_up_and_the_next_reply_says_so(
    name: str, progress: str, tmp_path: Path
) -> None:
    steps = functools.partial(gives_up_steps, timed_out=timeout_text(name, LIMIT))
    p = play(name, tmp_path, steps, GUARD, progress, LIMIT, hold=2)
    file, keys, per_second = LIMITS[name]
    assert p.installed[keys[-1]] == INSTALLED_S * per_second, (file, p.installed)
    assert p.seen == progress  # what reached `smllm mcp`, through the client
    # the client's own timeout text is the tool result, exactly (one of its strings)
    assert timeout_text(name, LIMIT) in p.result(2), p.result(2)
    # after the lowered limit, while the guard still ran: the instance had not moved yet
    assert p.model.between(1, 2) >= LIMIT
    assert p.model.holds[2].at_arrival is False
    assert_moved(p)
    # the next call: the note line, then the view; the one after: the view alone
    assert NOTE + "\n" + p.texts.after in p.result(3), p.result(3)
    assert p.texts.after in p.result(4), p.result(4)
    assert not any(NOTE in s for s in p.result(4))
    assert noted(p) == [3]


@pytest.mark.parametrize("name", ["copilot", "opencode"])
def test_progress_keeps_the_call_alive(name: str, tmp_path: Path) -> None:
    p = play(name, tmp_path, kept_steps, GUARD, EVERY_SECOND, LIMIT)
    assert p.seen == EVERY_SECOND
    assert p.model.between(1, 2) >= GUARD  # twice the limit, kept alive by progress
    assert p.texts.checked in p.result(2), p.result(2)
    assert p.texts.after in p.result(3), p.result(3)
    assert noted(p) == []
    assert_moved(p)


def test_opencode_waits_past_its_own_default_with_the_installed_limit(tmp_path: Path) -> None:
    p = play("opencode", tmp_path, kept_steps, PAST_DEFAULT, OFF, None)
    assert p.installed["timeout"] == INSTALLED_S * 1000
    assert p.seen == OFF
    assert p.model.between(1, 2) >= PAST_DEFAULT
    assert p.texts.checked in p.result(2), p.result(2)
    assert noted(p) == []
    assert_moved(p)


def entries(limit_s: int) -> dict[str, dict[str, Any]]:
    """smllm's MCP entry per client, with the tool-call limit the install must write: the key
    timeouts.md says each client reads, in its unit (Codex seconds, the others ms)."""
    json_entry = {"type": "stdio", "command": "smllm", "args": ["mcp"], "timeout": limit_s * 1000}
    return {
        "claude": json_entry,
        "copilot": json_entry,
        "codex": {
            "command": "smllm",
            "args": ["mcp"],
            "env_vars": ["XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "SMLLM_CONFIG"],
            "tool_timeout_sec": limit_s,
            "default_tools_approval_mode": "approve",
        },
        "opencode": {
            "type": "local",
            "command": ["smllm", "mcp"],
            "enabled": True,
            "timeout": limit_s * 1000,
        },
    }


@pytest.mark.parametrize("name", NAMES)
def test_the_installed_limit(name: str, tmp_path: Path) -> None:
    box = clients.sandbox(tmp_path)
    installed = smllm(["harness", "install", name], box.project, box.env)
    assert installed.code == 0, installed.err
    assert installed_entry(box.project, name) == entries(FLOOR_S)[name]
    # a machine whose guard may run 1000 s: the next install raises the limit, no --force
    write_machine(box.project, "slow", slow_machine(GUARD))
    again = smllm(["harness", "install", name], box.project, box.env)
    assert again.code == 0, again.err
    assert f"mcp: written ({LIMITS[name][0]})" in again.out.splitlines(), again.out
    assert installed_entry(box.project, name) == entries(INSTALLED_S)[name]
