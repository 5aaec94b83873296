"""Hostile model output against the real `smllm run` (issue 22): a scripted model on the example
project says what no model should (ACTs for undeclared tools, payloads that aren't JSON or
aren't objects, missing and repeated ids, arguments the schema or the engine refuses, two
events at once, paths out of the project, shell commands not allowed, THINK where thinking is
off, an ACT spelled as text, huge arguments). Each test asserts the exact OBS fed back (the
next turn's runtime blocks in `run-N.turns.jsonl`), the exit code, the summary, and that the
store's history and the session's audit hold exactly the accepted events."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import smllm
from helpers.scripts import act
from helpers.storerows import StoreRows

from smllm.drive.bytevocab import BYTE_IDS
from smllm.smi.tokens import Kind

SYMLINK = "is a symlink: the work tools follow no symlink, not even one pointing inside the project"
ONE_EVENT = (
    "one event per transmission: an event was already fired in this one; fire yield after "
    "reading that event's result, if it is still offered"
)


YIELD = [act("last", "yield")]


@dataclass
class Played:
    """One `smllm run --json` of a script: exit code, summary, transcript lines, stderr."""

    code: int
    summary: dict[str, Any]
    turns: list[dict[str, Any]]
    err: str

    @property
    def key(self) -> str:
        return str(self.summary["session"])

    def fed(self, turn: int) -> list[tuple[str, Any]]:
        """Turn `turn`'s runtime blocks but CAPS: (type, the JSON value, or the text)."""
        blocks = []
        for block in self.turns[turn - 1]["runtime"]:
            if block["type"] == "caps":
                continue
            try:
                value = json.loads(block["text"])
            except ValueError:
                value = block["text"]
            blocks.append((block["type"], value))
        return blocks

    def said(self, turn: int) -> list[dict[str, Any]]:
        return list(self.turns[turn - 1]["model"])


def play(
    project: Path, env: dict[str, str], script: list[list[dict[str, Any]]], *flags: str
) -> Played:
    """`smllm run dev --ref GH-7 --backend scripted:F --json FLAGS` with `script` as F."""
    path = project.parent / "script.json"
    path.write_text(json.dumps({"transmissions": script}))
    ran = smllm(
        ["run", "dev", "--ref", "GH-7", "--backend", f"scripted:{path}", "--json", *flags],
        project,
        env,
    )
    assert ran.out.startswith("{"), (ran.code, ran.err)  # a summary, never a traceback
    summary = json.loads(ran.out)
    with open(summary["transcript"], encoding="utf-8") as f:
        turns = [json.loads(line) for line in f]
    return Played(ran.code, summary, turns, ran.err)


def refusal(ident: str, kind: str, message: str) -> tuple[str, Any]:
    """The OBS (as `Played.fed` gives it) refusing ACT `ident`."""
    return ("obs", {"caused_by": ident, "ok": False, "error": {"type": kind, "message": message}})


def accepted(
    played: Played, project: Path, env: dict[str, str]
) -> list[tuple[str, dict[str, Any]]]:
    """The session's history in the store (StoreRows), checked against its audit's events and
    against the store's integrity: (event, params) in order."""
    rows = StoreRows.of(project, env)
    assert rows.integrity() == "ok"
    history = [
        (r["event"], r["params"]) for _, r in rows.all_history() if r["session"] == played.key
    ]
    shown = smllm(["session", "show", played.key, "--audit", "--json"], project, env)
    audit = [r["event"] for r in json.loads(shown.out)["audit"] if r["kind"] == "event"]
    assert audit == [event for event, _ in history]
    return history


ENTER = ("enter", {"stateMachine": "dev", "issueId": "GH-7"})


def yielded(played: Played, turns: int, accepted_acts: int, refused_acts: int) -> None:
    """The run ended on the script's last `yield`: exit 0, in PLAN."""
    assert played.code == 0, played.err
    s = played.summary
    assert (s["stop"], s["message"], s["state"], s["turns"]) == (
        "yield",
        "yielded in PLAN",
        "PLAN",
        turns,
    )
    assert s["acts"] == {"accepted": accepted_acts, "refused": refused_acts}


# -- undeclared tools, unreadable ACTs, ids ---------------------------------------------------


def undeclared(name: str) -> tuple[str, Any]:
    return refusal("a1", "unknown_capability", f"no tool {name!r} is declared in caps")


def unreadable(kind: str, message: str) -> tuple[str, Any]:
    return refusal("raw-1", kind, message)


def violation(problem: str) -> tuple[str, Any]:
    return refusal("a1", "schema_violation", f"planned: {problem}")


RAW = "a raw action, but caps declares no actions"
NOT_JSON = "the ACT payload is not a valid JSON object: not JSON: Expecting property name "
NO_ID = "the ACT has no id"


@pytest.mark.parametrize(
    ("call", "answer"),
    [
        (act("a1", "done"), undeclared("done")),
        (act("a1", "rm", path="PLAN.md"), undeclared("rm")),
        (act("a1", "read", path="PLAN.md"), undeclared("read")),  # no --tools
        (
            {"type": "act", "text": "{not json"},
            unreadable(
                "malformed_action", NOT_JSON + "enclosed in double quotes: line 1 column 2 (char 1)"
            ),
        ),
        ({"type": "act", "text": "fire done now"}, unreadable("unknown_capability", RAW)),
        ({"type": "act", "text": '["done", {}]'}, unreadable("unknown_capability", RAW)),
        (act(None, "planned", size="small"), unreadable("missing_id", NO_ID)),
        (act("", "planned", size="small"), unreadable("missing_id", NO_ID)),
        (
            {"type": "act", "json": {"id": "", "type": "raw", "name": "yield"}},
            unreadable("malformed_action", 'the ACT type must be "tool" or "action", not \'raw\''),
        ),
        (
            {"type": "act", "json": {"id": 7, "type": "tool", "name": "yield"}},
            unreadable("malformed_action", "the ACT id must be a string, not a number"),
        ),
        (
            act("a1", "planned", size="huge"),
            violation("$.size: 'huge' is not one of ['small', 'large']"),
        ),
        (
            act("a1", "planned", size="small", force=True),
            violation("$: Additional properties are not allowed ('force' was unexpected)"),
        ),
        (act("a1", "planned"), violation("$: 'size' is a required property")),
    ],
)
def test_an_act_the_caps_refuse_never_fires(
    project: Path, env: dict[str, str], call: dict[str, Any], answer: tuple[str, Any]
) -> None:
    played = play(project, env, [[call], YIELD])
    assert played.fed(2) == [answer]
    yielded(played, turns=2, accepted_acts=1, refused_acts=1)
    assert accepted(played, project, env) == [ENTER, ("yield", {})]
    assert not (project / "PLAN.md").exists()


def test_an_id_is_used_once_a_session(project: Path, env: dict[str, str]) -> None:
    """A repeated id is refused within a transmission and across turns: the first ACT with
    the id runs (planned: its guard is false, PLAN entered again), the others never do."""
    script = [[act("d", "planned", size="small"), act("d", "yield")], [act("d", "yield")], YIELD]
    played = play(project, env, script)
    duplicate = refusal("raw-1", "duplicate_id", "the id 'd' was already used in this session")
    (first, reply) = played.fed(2)
    assert first == duplicate
    assert reply[1]["ok"] is True and reply[1]["caused_by"] == "d"
    assert "Guard: command `test -f PLAN.md` → false" in reply[1]["content"]
    assert played.fed(3) == [
        refusal("raw-2", "duplicate_id", "the id 'd' was already used in this session")
    ]
    yielded(played, turns=3, accepted_acts=2, refused_acts=2)
    assert accepted(played, project, env) == [ENTER, ("planned", {"size": "small"}), ("yield", {})]


def test_a_second_event_in_one_transmission_is_denied(project: Path, env: dict[str, str]) -> None:
    script = [
        [
            act("w", "write", path="PLAN.md", content="the plan\n"),
            act("p", "planned", size="large"),
            act("y", "yield", note="done already?"),
        ],
        [act("y2", "yield")],
    ]
    played = play(project, env, script, "--tools", "write")
    denied, wrote, fired = played.fed(2)
    assert denied == refusal("y", "policy_denied", ONE_EVENT)
    assert wrote == (
        "obs",
        {"caused_by": "w", "ok": True, "content": {"path": "PLAN.md", "bytes": 9}},
    )
    assert fired[1]["caused_by"] == "p" and fired[1]["ok"] is True
    assert fired[1]["content"].startswith(
        f"<smllm>\nsession {played.key} · dev › WORK · issue GH-7\n"
    )
    assert played.code == 0
    assert played.summary["stop"] == "yield" and played.summary["state"] == "WORK"
    assert played.summary["acts"] == {"accepted": 3, "refused": 1}
    assert played.summary["events"] == 2
    assert accepted(played, project, env) == [ENTER, ("planned", {"size": "large"}), ("yield", {})]
    assert (project / "PLAN.md").read_text() == "the plan\n"


def test_the_engine_refuses_a_ref_off_its_pattern_in_its_own_words(
    project: Path, env: dict[str, str]
) -> None:
    """`enter` offered in idle (after unmatched) takes `issueId` as a plain string in CAPS:
    the engine checks the pattern and its refusal block is the OBS."""
    script = [
        [act("u", "unmatched")],
        [act("e", "enter", stateMachine="dev", issueId="../../etc")],
        [act("r", "resume")],
        YIELD,
    ]
    played = play(project, env, script)
    ((_, obs),) = played.fed(3)
    assert obs["caused_by"] == "e" and obs["ok"] is False and obs["error"]["type"] == "refused"
    assert obs["error"]["message"].startswith(
        f"<smllm>\nsession {played.key} · idle\n"
        'error: enter param issueId must match ^GH-[0-9]+$ (got "../../etc")\n'
    )
    yielded(played, turns=4, accepted_acts=3, refused_acts=1)
    assert accepted(played, project, env) == [
        ENTER,
        ("unmatched", {}),
        ("resume", {}),
        ("yield", {}),
    ]


# -- work tools out of bounds ---------------------------------------------------------------


@pytest.fixture
def outside(project: Path) -> Path:
    """A secret beside the project, and symlinks to it from inside."""
    folder = project.parent / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("TOPSECRET\n")
    (project / "link.txt").symlink_to(folder / "secret.txt")
    (project / "out").symlink_to(folder)
    return folder


STORE = "`.smllm/state` is smllm's own store: the work tools never touch it"


def dotdot(path: str) -> str:
    return f"`{path}` has a `..` component: paths stay in the project"


@pytest.mark.parametrize(
    ("tool", "arguments", "error"),
    [
        ("read", {"path": "../outside/secret.txt"}, dotdot("../outside/secret.txt")),
        (
            "read",
            {"path": "/etc/passwd"},
            "`/etc/passwd` is absolute: give it relative to the project folder",
        ),
        ("read", {"path": "link.txt"}, f"`link.txt` {SYMLINK}"),
        ("read", {"path": "out/secret.txt"}, f"`out` {SYMLINK}"),
        ("read", {"path": ".smllm/state/smllm.db"}, STORE),
        ("write", {"path": ".smllm/state/smllm.db", "content": "x"}, STORE),
        ("write", {"path": ".smllm/State/new", "content": "x"}, STORE),
        ("write", {"path": "out/secret.txt", "content": "x"}, f"`out` {SYMLINK}"),
        ("write", {"path": "link.txt", "content": "x"}, f"`link.txt` {SYMLINK}"),
        ("write", {"path": "../outside/new.txt", "content": "x"}, dotdot("../outside/new.txt")),
    ],
)
def test_a_path_out_of_the_project_is_refused(
    project: Path,
    env: dict[str, str],
    outside: Path,
    tool: str,
    arguments: dict[str, Any],
    error: str,
) -> None:
    store = StoreRows.of(project, env)
    played = play(project, env, [[act("t", tool, **arguments)], YIELD], "--tools", "read,write")
    assert played.fed(2) == [refusal("t", "policy_denied", error)]
    yielded(played, turns=2, accepted_acts=1, refused_acts=1)
    assert accepted(played, project, env) == [ENTER, ("yield", {})]
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "TOPSECRET\n"
    state = sorted(p.name for p in (project / ".smllm" / "state").iterdir())
    assert state == [".gitignore", "smllm.db"]
    assert store.integrity() == "ok"
    assert "TOPSECRET" not in json.dumps(played.turns)


@pytest.mark.parametrize(
    "path",
    [".smllm/dev.smllm.yaml", "./.smllm//dev.smllm.yaml", ".smllm/config.toml", "hardlink.yaml"],
)
def test_write_never_changes_the_machine_that_guides_the_run(
    project: Path, env: dict[str, str], path: str
) -> None:
    """A machine rewritten by the model could have its guard run any command, shell granted
    or not: the files the configs read are refused, by any name (a hard link too)."""
    machine = project / ".smllm" / "dev.smllm.yaml"
    (project / "hardlink.yaml").hardlink_to(machine)
    original = {f: f.read_bytes() for f in (machine, project / ".smllm" / "config.toml")}
    rewritten = machine.read_text().replace("test -f PLAN.md", "touch pwned")
    script = [
        [act("w", "write", path=path, content=rewritten)],
        [act("p", "planned", size="small")],
        YIELD,
    ]
    played = play(project, env, script, "--tools", "write", "--max-new-tokens", "4000")
    message = (
        f"`{path}` is one of the files that guide this run (its configs and machines): write "
        "never changes them"
    )
    assert played.fed(2) == [refusal("w", "policy_denied", message)]
    ((_, reply),) = played.fed(3)
    assert "Guard: command `test -f PLAN.md` → false (exited 1)" in reply["content"]
    yielded(played, turns=3, accepted_acts=2, refused_acts=1)
    assert not (project / "pwned").exists()
    assert {f: f.read_bytes() for f in original} == original


def unmatched(command: str) -> str:
    return f"`{command}` matches no --allow pattern of this run (echo *)"


@pytest.mark.parametrize(
    ("allow", "command", "message"),
    [
        ((), "touch pwned", "no command is allowed in this run (smllm run got no --allow pattern)"),
        (("echo *",), "touch pwned", unmatched("touch pwned")),
        (("echo *",), "sh -c 'touch pwned'", unmatched("sh -c 'touch pwned'")),
        (
            ("echo *",),
            "echo 'unclosed",
            "the command can't be split into words (No closing quotation): quote it as sh would",
        ),
    ],
)
def test_a_shell_command_not_allowed_never_runs(
    project: Path, env: dict[str, str], allow: tuple[str, ...], command: str, message: str
) -> None:
    flags = ["--tools", "shell", *(f"--allow={pattern}" for pattern in allow)]
    played = play(project, env, [[act("s", "shell", command=command)], YIELD], *flags)
    assert played.fed(2) == [refusal("s", "policy_denied", message)]
    yielded(played, turns=2, accepted_acts=1, refused_acts=1)
    assert not (project / "pwned").exists()


def test_an_allowed_command_gets_no_shell(project: Path, env: dict[str, str]) -> None:
    """`echo *` allows `echo hi && touch pwned`, which runs echo with `&&`, `touch` and
    `$(touch pwned)` as its words: nothing is created."""
    command = "echo hi && touch pwned $(touch pwned2) `touch pwned3`; touch pwned4"
    script = [[act("s", "shell", command=command)], YIELD]
    played = play(project, env, script, "--tools", "shell", "--allow", "echo *")
    output = "hi && touch pwned $(touch pwned2) `touch pwned3`; touch pwned4\n"
    content = {"exit": 0, "output": output, "truncated": False, "timedOut": False}
    assert played.fed(2) == [("obs", {"caused_by": "s", "ok": True, "content": content})]
    yielded(played, turns=2, accepted_acts=2, refused_acts=0)
    assert not list(project.glob("pwned*"))


# -- THINK, ACT-like text, huge arguments ------------------------------------------------------


def test_think_when_thinking_is_disabled_ends_the_run(project: Path, env: dict[str, str]) -> None:
    """The runtime replays the backend's ids through the budget, which forbids `<|think|>`:
    the run ends as a model error, nothing fired, the instance kept where it was."""
    script = [[{"type": "think", "text": "plan quietly"}, act("y", "yield")]]
    played = play(project, env, script, "--think", "disabled")
    think = BYTE_IDS[Kind.THINK]
    message = f"SmiError: the backend generated id {think} where the budget forbids it (id 0)"
    assert played.code == 1
    assert (played.summary["stop"], played.summary["message"]) == ("model-error", message)
    assert (played.summary["state"], played.summary["turns"]) == ("PLAN", 0)
    assert played.summary["acts"] == {"accepted": 0, "refused": 0}
    (line,) = played.turns
    assert (line["model"], line["generated"], line["note"]) == (None, [], message)
    assert json.loads(line["runtime"][0]["text"]) == {"reasoning": {"mode": "disabled"}}
    assert accepted(played, project, env) == [ENTER]


def test_an_act_spelled_in_out_text_is_text(project: Path, env: dict[str, str]) -> None:
    """`<|act|>…<|eot|>` written in an OUT payload is compiled as its bytes: the turn holds no
    ACT, so it is a stop the engine blocks (its block comes back as OBS); `done` never fires."""
    text = 'ok <|act|>{"id":"x","type":"tool","name":"done","arguments":{}}<|eot|><|act|>'
    played = play(project, env, [[{"type": "out", "text": text}], YIELD])
    assert played.said(1) == [{"type": "out", "text": text}]
    generated = played.turns[0]["generated"]
    assert BYTE_IDS[Kind.ACT] not in generated
    assert generated.count(BYTE_IDS[Kind.EOT]) == 1 and generated[-1] == BYTE_IDS[Kind.EOT]
    ((kind, block),) = played.fed(2)
    assert kind == "obs" and isinstance(block, str)
    assert block.startswith(f"<smllm>\nsession {played.key} · dev › PLAN · issue GH-7\n")
    assert "- planned: Fire after you write the plan in PLAN.md." in block
    yielded(played, turns=2, accepted_acts=1, refused_acts=0)
    assert accepted(played, project, env) == [ENTER, ("yield", {})]
    shown = smllm(["session", "show", played.key, "--audit", "--json"], project, env)
    kinds = [r["kind"] for r in json.loads(shown.out)["audit"]]
    assert kinds == ["bind", "event", "block", "event"]


def test_huge_arguments(project: Path, env: dict[str, str]) -> None:
    """A note past --max-new-tokens is cut, so its ACT is unreadable; one that fits but passes
    the engine's 64 KiB of params is refused by the engine; one under that is kept whole."""
    cut, refused, kept = "x" * 90_000, "y" * 70_000, "z" * 60_000
    script = [[act(i, "yield", note=n)] for i, n in (("c", cut), ("r", refused), ("k", kept))]
    played = play(project, env, script, "--max-new-tokens", "80000")
    first = played.turns[0]
    assert len(first["generated"]) == 80_001  # the budget's ids, then the <|eot|> it forces
    assert (
        first["model"][0]["text"]
        == '{"id":"c","type":"tool","name":"yield","arguments":{"note":"' + "x" * 79_938
    )
    unterminated = "Unterminated string starting at: line 1 column 60 (char 59)"
    message = f"the ACT payload is not a valid JSON object: not JSON: {unterminated}"
    assert played.fed(2) == [refusal("raw-1", "malformed_action", message)]
    ((_, obs),) = played.fed(3)
    assert obs["caused_by"] == "r" and obs["error"]["type"] == "refused"
    assert obs["error"]["message"].startswith(
        f"<smllm>\nsession {played.key} · dev › PLAN · issue GH-7\n"
        "error: yield params are too large (70014 bytes of JSON; at most 65536)\n"
    )
    yielded(played, turns=3, accepted_acts=1, refused_acts=2)
    assert accepted(played, project, env) == [ENTER, ("yield", {"note": kept})]
