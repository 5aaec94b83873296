"""Issue 20 §1 with the real clients: a guard that outlives the client's MCP tool-call limit.

A small machine `slow` (task T-1: WORK --checked--> DONE) whose guard sleeps GUARD seconds is
added to the example project before `smllm harness install`; the guard also writes the value
of SMLLM_PROGRESS_SECONDS it was run with (the server's, which it inherits) into the project,
so a test knows what progress interval reached `smllm mcp` through the client. The client's
limit is then lowered in the file the install wrote (`set_limit`), or left as installed.

Facts per client (the key each reads, what it tells the model on a timeout, whether progress
resets its limit): the research notes on MCP tool-call timeouts (timeouts.md, issue 20),
measured with these same pinned clients.

The fake model can hold a step (`HoldingModel`): the request that would take it waits, up to
a bound, until a condition holds (here: the instance moved, the guard having finished), so
the model's next call reaches a server that is no longer busy with the call the client gave
up on."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from conftest import smllm, write_machine
from helpers.slow_machine import slow_machine as helpers_slow_machine

from e2e import clients, wire
from e2e.fake_model import SESSION, Call, FakeModel, Step, is_tool_result, strings_of
from e2e.scenario import fire

REF = "T-1"
PROMPT = f"Run the slow check of task {REF}."
#: the guard's own timeoutSecs: the install writes this plus a minute as each client's limit
GUARD_TIMEOUT_S = 1000
INSTALLED_S = GUARD_TIMEOUT_S + 60
#: what the install writes when no command of the machines may run longer than 60 s
FLOOR_S = 900
#: where the guard writes the SMLLM_PROGRESS_SECONDS it was run with (in the project)
SEEN = "progress-seconds.txt"
NOTE = (
    "note: your last call (checked) was carried out after the client stopped waiting for its "
    "reply; what it did stands"
)
ENTER = fire("enter", stateMachine="slow", taskId=REF)
ENTER_ARGS = ("--param", "stateMachine=slow", "--param", f"taskId={REF}")
HEADER_KEY = re.compile(r"<smllm>\nsession (sm-[0-9a-z]{6})\b")

#: each client's per-server tool-call limit as the install writes it: (file in the project,
#: keys down to the value, units per second)
LIMITS: dict[str, tuple[str, tuple[str, ...], int]] = {
    "claude": (".mcp.json", ("mcpServers", "smllm", "timeout"), 1000),
    "copilot": (".mcp.json", ("mcpServers", "smllm", "timeout"), 1000),
    "codex": (".codex/config.toml", ("mcp_servers", "smllm", "tool_timeout_sec"), 1),
    "opencode": ("opencode.json", ("mcp", "smllm", "timeout"), 1000),
}


def timeout_text(name: str, limit_s: int) -> str:
    """What client NAME puts in the tool result when smllm's call outlives LIMIT_S seconds
    (timeouts.md's "Text the model gets on timeout", with the server and tool named smllm)."""
    return {
        "claude": f'MCP server "smllm" tool "smllm" timed out after {limit_s}s',
        "codex": (
            "tool call error: tool call failed for `smllm/smllm`\n\nCaused by:\n"
            f"    timed out awaiting tools/call after {limit_s}s"
        ),
        "copilot": "MCP server 'smllm': McpError: MCP error -32001: Request timed out",
        "opencode": "MCP error -32001: Request timed out",
    }[name]


def slow_machine(seconds: int) -> str:
    """The slow machine whose guard also writes the SMLLM_PROGRESS_SECONDS it was run with."""
    run = f'printf %s "$SMLLM_PROGRESS_SECONDS" > {SEEN} && sleep {seconds}'
    return helpers_slow_machine(seconds, run, GUARD_TIMEOUT_S)


def swap(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, (old, text)
    return text.replace(old, new)


@dataclass(frozen=True)
class Texts:
    """The blocks the agent must see, `{{session}}` standing for the key: what the CLI prints
    for the same calls in a twin project (a twin of the slow machine whose guard sleeps 0 s;
    only the command in the guard's trace line differs)."""

    idle: str  # a new session's view (the session start)
    entered: str  # enter slow T-1 → WORK
    checked: str  # checked, the guard true → DONE, back in idle
    after: str  # the session's view after that: idle

    @classmethod
    def of_twin(cls, root: Path, guard_s: int) -> Texts:
        box = clients.sandbox(root)
        write_machine(box.project, "slow", slow_machine(0))

        def out(*args: str) -> str:
            ran = smllm(list(args), box.project, box.env)
            assert ran.code == 0, (args, ran.out, ran.err)
            return ran.out.rstrip("\n")

        idle = out("session", "new")
        key = HEADER_KEY.findall(idle)[0]
        entered = out("fire", "--session", key, "enter", *ENTER_ARGS)
        fired = out("fire", "--session", key, "checked")
        checked = swap(fired, "&& sleep 0`", f"&& sleep {guard_s}`")
        after = out("session", "show", key)
        texts = [t.replace(key, SESSION) for t in (idle, entered, checked, after)]
        return cls(*texts)

    def for_key(self, key: str) -> Texts:
        return Texts(*(t.replace(SESSION, key) for t in vars(self).values()))


def view() -> Call:
    return Call("smllm", {"session": SESSION})


def gives_up_steps(t: Texts, timed_out: str) -> list[Step]:
    """The model enters T-1 and fires checked; the client gives up on the call and tells the
    model TIMED_OUT; once the instance moved (a hold), the model looks: the note and the view;
    it looks again: the view alone; it stops (in idle, so freely)."""
    return [
        Step((t.idle,), "Starting the task.", (ENTER,), "session start, enter"),
        Step((t.entered,), "", (fire("checked"),), "in WORK, checked (the slow guard)"),
        Step((timed_out,), "The call timed out; looking again.", (view(),), "timed out, look"),
        Step((NOTE + "\n" + t.after,), "", (view(),), "the note, look again"),
        Step((t.after,), "The check passed.", (), "no note, stop"),
    ]


def kept_steps(t: Texts) -> list[Step]:
    """The model enters T-1 and fires checked, which the client waits out: DONE; it looks:
    the view without a note; it stops."""
    return [
        Step((t.idle,), "Starting the task.", (ENTER,), "session start, enter"),
        Step((t.entered,), "", (fire("checked"),), "in WORK, checked (the slow guard)"),
        Step((t.checked,), "", (view(),), "checked went through, look"),
        Step((t.after,), "The check passed.", (), "no note, stop"),
    ]


@dataclass
class Hold:
    """A step that waits, before it is played, until READY() (polled, up to TIMEOUT s)."""

    ready: Callable[[], bool]
    what: str  # what it waits for, for the mismatch message
    timeout: float = 60.0
    #: whether READY() already held when the request came (None: not reached yet)
    at_arrival: bool | None = None

    def wait(self) -> bool:
        end = time.monotonic() + self.timeout
        self.at_arrival = self.ready()
        done = self.at_arrival
        while not done and time.monotonic() < end:
            time.sleep(0.25)
            done = self.ready()
        return done


class HoldingModel(FakeModel):
    """The fake model, with `holds` (step index → Hold) and each request's arrival time."""

    def __init__(self, logdir: Path) -> None:
        super().__init__(logdir)
        self.holds: dict[int, Hold] = {}
        self.arrived: dict[int, float] = {}  # request number → time.monotonic()

    def take(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> wire.Reply:
        arrived = time.monotonic()
        hold = self.holds.get(self.taken) if wire.tool_names(body) else None
        fresh = hold is not None and hold.at_arrival is None and not self.mismatches
        if hold is not None and fresh and not hold.wait():
            with self.changed:
                late = f"step {self.taken}: {hold.what} not within {hold.timeout} s"
                self.mismatches.append(late)
        reply = super().take(path, headers, body)
        number = next(r.number for r in reversed(self.requests) if r.body is body)
        self.arrived[number] = arrived
        return reply

    def step_request(self, step: int) -> int:
        """The number of the request that took STEP."""
        return next(r.number for r in self.requests if r.step == step)

    def between(self, first: int, second: int) -> float:
        """Seconds from the request that took step FIRST to the one that took SECOND."""
        return self.arrived[self.step_request(second)] - self.arrived[self.step_request(first)]


def last_tool_result(body: dict[str, Any]) -> list[str]:
    """Every string of the last tool result a request carries (in the client's format)."""
    found: list[Any] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if is_tool_result(value):
                found.append(value)
                return
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(body)
    return list(strings_of(found[-1])) if found else []


# -- the installed files -------------------------------------------------------------------------


def _load(path: Path) -> Any:
    return (
        tomlkit.parse(path.read_text()) if path.suffix == ".toml" else json.loads(path.read_text())
    )


def _dump(path: Path, doc: Any) -> None:
    path.write_text(tomlkit.dumps(doc) if path.suffix == ".toml" else json.dumps(doc, indent=2))


def installed_entry(project: Path, name: str) -> dict[str, Any]:
    """smllm's MCP server entry in client NAME's project file, as plain data."""
    file, keys, _ = LIMITS[name]
    entry = _load(project / file)
    for key in keys[:-1]:
        entry = entry[key]
    plain: dict[str, Any] = json.loads(json.dumps(entry))  # tomlkit's items as plain values
    return plain


def set_limit(project: Path, name: str, seconds: int) -> None:
    """Client NAME's tool-call limit for smllm, in the file the install wrote, to SECONDS."""
    file, keys, per_second = LIMITS[name]
    doc = _load(project / file)
    entry = doc
    for key in keys[:-1]:
        entry = entry[key]
    entry[keys[-1]] = seconds * per_second
    _dump(project / file, doc)


def forward_to_codex_server(project: Path, variable: str) -> None:
    """Codex gives an MCP server only the variables its entry's env_vars name (and a fixed
    few): add VARIABLE to those of smllm's entry."""
    path = project / ".codex" / "config.toml"
    doc = tomlkit.parse(path.read_text())
    names: Any = doc["mcp_servers"]["smllm"]["env_vars"]
    if variable not in names:
        names.append(variable)
    path.write_text(tomlkit.dumps(doc))


def state_of(box: clients.Sandbox) -> str:
    """T-1's state, or "" while `instance show` can't tell (for a Hold, which polls)."""
    ran = smllm(["instance", "show", REF, "--json"], box.project, box.env)
    state = json.loads(ran.out)["instance"]["state"] if ran.code == 0 else ""
    return str(state)


def instance(box: clients.Sandbox) -> dict[str, Any]:
    """`smllm instance show T-1 --json` of the sandbox's project."""
    ran = smllm(["instance", "show", REF, "--json"], box.project, box.env)
    assert ran.code == 0, (ran.out, ran.err)
    shown: dict[str, Any] = json.loads(ran.out)
    return shown
