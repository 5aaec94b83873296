"""Issue 20 §4: switching agents mid-task without losing the work. One issue (GH-12 of the
example machine) goes through the four real clients in turn, offline, in ONE project and ONE
HOME, so they share smllm's store: started in Claude Code and paused; continued from Codex
(`enter` with its ref) and yielded; taken over from Copilot CLI and yielded; taken over and
finished from OpenCode (`serve` + `run --attach`). tests/e2e/handoff.py has the script.

Checked: the four installs side by side leave every part of each `current`; every block each
client's model saw, exactly, and where it came from (session start, tool result, blocked
stop); one blocked text-only stop per client, in smllm's audit of each session; the instance's
history, contiguous from the first `enter` to DONE, each record by the session that made it;
and `session list`, which shows a session whose instance another session took over as moved.
Needs the pinned clients (`npm ci --prefix tests/clients`, scripts/test runs it) and Node;
without them the tests fail, saying so."""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import smllm
from e2e import clients, handoff
from e2e.fake_model import FakeModel, Request, split_texts
from e2e.handoff import ORDER, PROMPTS, Previous
from e2e.scenario import NOTE

#: one client's steps may take this long (the clients take 2 – 15 s)
#: every part each harness installs in the project (cli-and-harnesses.md §6)
PARTS = {
    "claude": ["instructions", "mcp", "hooks", "permissions", "statusline"],
    "codex": ["instructions", "mcp", "hooks"],
    "copilot": ["instructions", "mcp", "hooks"],
    "opencode": ["instructions", "mcp", "plugin"],
    "agents": ["instructions"],  # the region the other four share
}


@dataclass
class Part:
    """One client's part of the handoff: what its model was sent, and the store after it."""

    client: clients.Client
    model: FakeModel
    ran: clients.Ran
    previous: Previous  # the session before this one, as the store had it before this run
    key: str  # the smllm session the client's hooks bound
    sessions: list[dict[str, Any]]  # `session list --json` after the client's run
    listed: str  # `session list` after the client's run

    def request(self, step: int) -> Request:
        return next(r for r in self.model.requests if r.step == step)


@dataclass
class Handoff:
    box: clients.Sandbox
    installed: dict[str, str]  # each install's output
    status: dict[str, Any]  # `harness status --json` after the four installs
    parts: dict[str, Part]
    instance: dict[str, Any]  # `instance show GH-12 --json` at the end
    audits: dict[str, list[dict[str, Any]]]  # per client, its session's audit


def cli(box: clients.Sandbox, args: list[str]) -> dict[str, Any]:
    ran = smllm(args, box.project, box.env)
    assert (ran.code, ran.err) == (0, ""), (args, ran)
    value: dict[str, Any] = json.loads(ran.out)
    return value


def minute(at: str) -> str:
    """A stored UTC time as blocks show it: `YYYY-MM-DD HH:MM UTC`."""
    return f"{at[:10]} {at[11:16]} UTC"


def play(root: Path) -> Handoff:
    box = clients.sandbox(root)
    installed: dict[str, str] = {}
    for name in ORDER:
        install = smllm(["harness", "install", name], box.project, box.env)
        assert install.code == 0, install.err
        installed[name] = install.out
    status = cli(box, ["harness", "status", "--json"])
    parts: dict[str, Part] = {}
    previous = Previous("", "")
    for name in ORDER:
        with FakeModel(root / "requests" / name) as model:
            client = clients.CLIENT_TYPES[name](box, model.url)
            plan = client.write_plan(handoff.PLAN_TEXT)
            model.steps = handoff.steps(name, plan, client.as_stop_reason, previous)
            try:
                client.prepare()
                ran = client.run(PROMPTS[name], resume=False)
                assert ran.code == 0, ran.describe()
                clients.settle(model, client, len(model.steps), ran)
            finally:
                client.close()
        sessions = cli(box, ["session", "list", "--json"])["sessions"]
        mine = [s["key"] for s in sessions if s["harness"] == name]
        assert len(mine) == 1, sessions
        listed = smllm(["session", "list"], box.project, box.env).out
        parts[name] = Part(client, model, ran, previous, mine[0], sessions, listed)
        seen = cli(box, ["instance", "show", "GH-12", "--json"])["instance"]["holderSeen"]
        previous = Previous(mine[0], minute(seen))
    instance = cli(box, ["instance", "show", "GH-12", "--json"])
    audits = {
        name: cli(box, ["session", "show", p.key, "--audit", "--json"])["audit"]
        for name, p in parts.items()
    }
    return Handoff(box, installed, status, parts, instance, audits)


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Handoff:
    """The handoff, played once for all the checks (a failure fails each of them)."""
    return play(tmp_path_factory.mktemp("handoff"))


def test_the_four_installs_share_the_project(played: Handoff) -> None:
    h = played
    # each later install leaves the shared parts as the earlier ones wrote them
    assert h.installed["copilot"].startswith("instructions: current (AGENTS.md)\n")
    assert h.installed["copilot"].splitlines()[1] == "mcp: current (.mcp.json)"
    assert h.installed["opencode"].startswith("instructions: current (AGENTS.md)\n")
    # and after all four, every part of every harness is current
    got = {
        s["harness"]: [(p["part"], p["state"]) for p in s["parts"]] for s in h.status["harnesses"]
    }
    assert got == {name: [(p, "current") for p in parts] for name, parts in PARTS.items()}


def unescape_for(name: str) -> Callable[[str], str]:
    """How to read a client's stop reason back: Codex XML-escapes it in <hook_prompt>."""
    if name == "codex":
        return lambda s: html.unescape(s) if s.startswith("<hook_prompt") else s
    return lambda s: s


@pytest.mark.parametrize("name", ORDER)
def test_the_model_saw_every_block_exactly(played: Handoff, name: str) -> None:
    p = played.parts[name]
    # every main turn took its step, in order: no extra turn, so exactly one stop was
    # blocked (the step after the text-only one) and the last stop was allowed
    steps = len(p.model.steps)
    assert [r.step for r in p.model.main_requests()] == list(range(steps))
    expected = [
        (text.replace("{{session}}", p.key), kind)
        for text, kind in handoff.HandoffTexts().seen_by(name, p.previous)
    ]
    # the last request carries the whole conversation: its blocks are exactly those expected,
    # in order, and each came the expected way
    last = p.request(steps - 1)
    assert handoff.blocks_in(last.strings, unescape_for(name)) == [t for t, _ in expected]
    results, others = split_texts(last.body)
    for text, kind in expected:
        if kind == "tool":  # the tool's result is the block alone
            assert text in results, text
            assert not any(text in s for s in others), text
        else:
            text = p.client.as_stop_reason(text) if kind == "stop" else text
            assert any(text in s for s in others), text
            assert not any(text in s for s in results), text
    # the session start came before any tool call, with the client's own prompt
    first_results, first_others = split_texts(p.request(0).body)
    assert first_results == []
    assert any(expected[0][0] in s for s in first_others)
    assert any(PROMPTS[name] in s for s in first_others)
    if name == "opencode":
        # the plugin appends the session's view to the first system message of every main
        # request, asking for it again after each smllm tool call and at its own re-prompt:
        # the idle list, WORK (visit 3) from the takeover on, the idle list after done
        work = handoff.HandoffTexts().work_view_at(3).replace("{{session}}", p.key)
        shown = [expected[0][0], work, work, expected[0][0]]
        for r in p.model.main_requests():
            first = r.body["messages"][0]
            assert first["role"] == "system" and r.step is not None, r.number
            assert first["content"].endswith("\n\n" + shown[r.step]), r.number
    # requests without tools (OpenCode's title request) never carry smllm's text
    assert not [
        r.number
        for r in p.model.requests
        if not r.tools and handoff.BLOCK.search("\n".join(r.strings))
    ]


def audit_line(a: dict[str, Any]) -> str:
    if a["kind"] == "bind":
        return f"bind {a['harness']} {a['hostSession']} {a['cwd']}"
    if a["kind"] == "event":
        return f"event {a['event']} {a['from'] or '-'} → {a['to']}"
    if a["kind"] == "prompt":
        return f"prompt yielded={a['yielded']} blocks={a['blocks']}"
    return f"{a['kind']} {a.get('state', '')}"


def test_each_client_blocked_one_text_only_stop(played: Handoff) -> None:
    h = played
    bind = {
        name: f"bind {name} {p.client.session_id} {h.box.project}" for name, p in h.parts.items()
    }
    # one bind each, from its own session start; a prompt of a new session clears nothing,
    # so none is audited (nor Copilot's prompt hook firing again on the block's reason)
    assert {name: [audit_line(a) for a in audit] for name, audit in h.audits.items()} == {
        "claude": [bind["claude"], "event enter - → PLAN", "block PLAN", "event pause PLAN → PLAN"],
        "codex": [
            bind["codex"],
            "event enter PLAN → PLAN",
            "event planned PLAN → WORK",
            "block WORK",
            "event yield WORK → WORK",
        ],
        "copilot": [
            bind["copilot"],
            "event enter WORK → WORK",
            "block WORK",
            "event yield WORK → WORK",
        ],
        "opencode": [
            bind["opencode"],
            "event enter WORK → WORK",
            "block WORK",
            "event done WORK → DONE",
        ],
    }


def test_the_history_is_contiguous(played: Handoff) -> None:
    h = played
    key = {name: p.key for name, p in h.parts.items()}
    inst, history = h.instance["instance"], h.instance["history"]
    assert (inst["state"], inst["status"], inst["holder"]) == ("DONE", "completed", None)
    assert inst["visits"] == {"PLAN": 2, "WORK": 3, "DONE": 1}
    # each record starts where the one before it ended
    assert [r["from"] for r in history] == [None] + [r["to"] for r in history[:-1]]
    assert [r["version"] for r in history] == list(range(1, 10)) and inst["version"] == 9
    # the takeovers' notes name the session before and its last event on the instance
    copilot, opencode = h.parts["copilot"].previous, h.parts["opencode"].previous
    assert (copilot.key, opencode.key) == (key["codex"], key["copilot"])
    assert copilot.seen == minute(history[4]["at"]) and opencode.seen == minute(history[6]["at"])
    took = "Took over from session {} (last active {})"
    from_codex, from_copilot = (took.format(p.key, p.seen) for p in (copilot, opencode))
    enter = {"stateMachine": "dev", "issueId": "GH-12"}
    guard = "Guard: command `test -f PLAN.md` → true"
    note = {"note": NOTE}
    assert [
        (r["session"], r["event"], r["params"], r["from"], r["to"], r["status"], r["trace"])
        for r in history
    ] == [
        (key["claude"], "enter", enter, None, "PLAN", "active", []),
        (key["claude"], "pause", {}, "PLAN", "PLAN", "paused", ["Paused issue GH-12 at PLAN."]),
        (key["codex"], "enter", enter, "PLAN", "PLAN", "active", []),
        (key["codex"], "planned", {"size": "small"}, "PLAN", "WORK", "active", [guard]),
        (key["codex"], "yield", note, "WORK", "WORK", "active", []),
        (key["copilot"], "enter", enter, "WORK", "WORK", "active", [from_codex]),
        (key["copilot"], "yield", note, "WORK", "WORK", "active", []),
        (key["opencode"], "enter", enter, "WORK", "WORK", "active", [from_copilot]),
        (key["opencode"], "done", {}, "WORK", "DONE", "completed", []),
    ]
    assert (h.box.project / "PLAN.md").read_text() == handoff.PLAN_TEXT


def table(sessions: list[dict[str, Any]], wheres: list[str]) -> str:
    """`session list`'s text: KEY WHERE HARNESS LAST-ACTIVE CWD, padded."""
    width = max(len(w) for w in wheres)
    harness = max(len(s["harness"]) for s in sessions)
    return "".join(
        f"{s['key']}  {w.ljust(width)}  {s['harness'].ljust(harness)}  "
        f"{minute(s['lastActive'])}  {s['cwd']}\n"
        for s, w in zip(sessions, wheres, strict=True)
    )


def test_session_list_shows_who_moved_on(played: Handoff) -> None:
    h = played
    key = {name: p.key for name, p in h.parts.items()}
    place = {"machine": "dev", "id": h.instance["instance"]["id"], "label": "GH-12"}

    def where(sessions: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
        return [(s["key"], s["harness"], s["holding"]) for s in sessions]

    # after Claude Code: paused, so idle
    assert where(h.parts["claude"].sessions) == [(key["claude"], "claude", None)]
    # after Codex: it holds GH-12 in WORK, yielded
    codex = h.parts["codex"].sessions
    assert where(codex) == [
        (key["codex"], "codex", {**place, "state": "WORK"}),
        (key["claude"], "claude", None),
    ]
    assert (codex[0]["yielded"], codex[0]["blocks"]) == (True, 0)
    # after Copilot: GH-12 moved from Codex's session to Copilot's
    copilot = h.parts["copilot"].sessions
    assert where(copilot) == [
        (key["copilot"], "copilot", {**place, "state": "WORK"}),
        (key["codex"], "codex", {**place, "state": "WORK", "movedTo": key["copilot"]}),
        (key["claude"], "claude", None),
    ]
    moved = f"dev › WORK · issue GH-12 (moved to session {key['copilot']})"
    assert h.parts["copilot"].listed == table(copilot, ["dev › WORK · issue GH-12", moved, "idle"])
    # after OpenCode: it completed GH-12 and is in idle; Codex's and Copilot's sessions still
    # name it, completed since, until their next call
    final = h.parts["opencode"].sessions
    completed = {**place, "state": "DONE", "status": "completed"}
    assert where(final) == [
        (key["opencode"], "opencode", None),
        (key["copilot"], "copilot", completed),
        (key["codex"], "codex", completed),
        (key["claude"], "claude", None),
    ]
    assert [s["hostSession"] for s in final] == [
        h.parts[name].client.session_id for name in reversed(ORDER)
    ]
    assert {s["cwd"] for s in final} == {str(h.box.project)}
    now = "dev › DONE · issue GH-12 (now completed)"
    assert h.parts["opencode"].listed == table(final, ["idle", now, now, "idle"])
