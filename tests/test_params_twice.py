"""A param given twice is refused, on every surface that reads params and for every kind of
event (issue 12 §1.1; machine-format.md §2.4 check 1, engine.md §5.1 check 1).

Surfaces: a repeated `--param`, a repeated top-level key in `--params JSON`, the same name in
both (`--params` and `--param` add up), and a repeated key in the MCP tool's `params` object.
Events: a machine event's string param and JSON param, a machine event that takes no params,
a `source: host` event fired with `--host`, the built-ins of a state (`yield`, `pause`,
`unmatched`, `resume` in the fallback state), of idle (`enter`, `resume`), and the `pause` and
`unmatched` that are left when the saved state is gone (engine.md §7.3).

The refusal is checked word for word, and checked to come first: before "takes no params" and
"has no param", and before a value's own checks. Each case also shows that the same call with
the name given once gets past that check, so the refusal is the duplicate's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import smllm, write_machine
from helpers.mcp_client import McpProcess

TWICE = """\
id: twice
description: Events with params, and events without.
initial: WORK
meta:
  smllm: 1
  instance: { kind: task, ref: { param: taskId } }
  events:
    go:
      description: Go, with a size and some files.
      params:
        type: object
        properties:
          size: { enum: [small, large] }
          files: { type: array, items: { type: string } }
    done: { description: Finish. }
    approved:
      description: The host approves.
      source: host
      params: { type: object, properties: { by: { type: string } } }
    handled: { description: Back to work. }
states:
  WORK:
    meta: { entryPoint: true }
    entry: { type: prompt, params: { text: "Work." } }
    on:
      go: { actions: { type: prompt, params: { text: "Went." } } }
      done: DONE
      approved: { actions: { type: prompt, params: { text: "Approved." } } }
  ASIDE:
    meta: { fallback: true }
    entry: { type: prompt, params: { text: "Aside." } }
    on:
      handled: WORK
  DONE:
    type: final
    entry: { type: prompt, params: { text: "Done." } }
"""

Pairs = list[tuple[str, Any]]


def error_of(out: str) -> str | None:
    lines = [line for line in out.splitlines() if line.startswith("error: ")]
    assert len(lines) <= 1, out
    return lines[0] if lines else None


def where(out: str) -> str:
    """The block's header line."""
    return out.split("\n")[1]


def _fire(
    folder: Path, env: dict[str, str], key: str | None, event: str, how: str, pairs: Pairs
) -> tuple[int, str]:
    """Fire EVENT with PAIRS (in order, repeats kept) the way HOW says:
    `param` (repeated --param), `params` (one --params object, its keys repeated) or `both`
    (the first pair in --params, the others as --param). JSON values go as JSON text."""
    args = ["fire", *(["--session", key] if key else []), event]
    if event == "approved":
        args.insert(1, "--host")

    def text(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value)

    if how == "param":
        for name, value in pairs:
            args += ["--param", f"{name}={text(value)}"]
    elif how == "params":
        body = ", ".join(f"{json.dumps(n)}: {json.dumps(v)}" for n, v in pairs)
        args += ["--params", "{" + body + "}"]
    else:
        (first, value), *rest = pairs
        args += ["--params", json.dumps({first: value})]
        for name, value in rest:
            args += ["--param", f"{name}={text(value)}"]
    ran = smllm(args, folder, env)
    assert ran.err == "", ran.err
    return ran.code, ran.out


@pytest.fixture
def twice(project: Path) -> Path:
    write_machine(project, "twice", TWICE)
    return project


def _in_work(folder: Path, env: dict[str, str], ref: str) -> str:
    ran = smllm(
        ["fire", "enter", "--param", "stateMachine=twice", "--param", f"taskId={ref}", "--json"],
        folder,
        env,
    )
    assert ran.code == 0, ran.out
    key: str = json.loads(ran.out)["session"]
    return key


SURFACES = ["param", "params", "both"]

#: (event, the pairs given, the refusal, the pairs that get past the duplicate check) in state
#: WORK of `twice`; the last item's outcome: True accepted, else the refusal it gets instead
IN_STATE: list[tuple[str, Pairs, str, Pairs, bool | str]] = [
    ("go", [("size", "small"), ("size", "large")], "go got param size", [("size", "small")], True),
    # the same value twice is a param given twice too
    ("go", [("size", "small"), ("size", "small")], "go got param size", [("size", "small")], True),
    ("go", [("files", ["a"]), ("files", ["b"])], "go got param files", [("files", ["a"])], True),
    (
        "go",
        [("size", "small"), ("files", ["a"]), ("size", "huge")],
        "go got param size",
        [("size", "huge")],
        'go param size must be one of: small, large (got "huge")',
    ),
    (
        "go",
        [("bogus", "1"), ("bogus", "2")],
        "go got param bogus",
        [("bogus", "1")],
        "go has no param bogus (params: size, files)",
    ),
    (
        "done",
        [("x", "1"), ("x", "2")],
        "done got param x",
        [("x", "1")],
        "done takes no params, but got x",
    ),
    ("approved", [("by", "ann"), ("by", "bob")], "approved got param by", [("by", "ann")], True),
    ("yield", [("note", "a"), ("note", "b")], "yield got param note", [("note", "a")], True),
    (
        "pause",
        [("x", "1"), ("x", "2")],
        "pause got param x",
        [("x", "1")],
        "pause takes no params, but got x",
    ),
    (
        "unmatched",
        [("x", "1"), ("x", "2")],
        "unmatched got param x",
        [("x", "1")],
        "unmatched takes no params, but got x",
    ),
]


@pytest.mark.parametrize("how", SURFACES)
def test_in_a_state(twice: Path, env: dict[str, str], how: str) -> None:
    key = _in_work(twice, env, "T-1")
    for event, pairs, refusal, once, then in IN_STATE:
        code, out = _fire(twice, env, key, event, how, pairs)
        assert (code, error_of(out)) == (1, f"error: {refusal} more than once"), (event, pairs)
        assert where(out) == f"session {key} · twice › WORK · task T-1", out
        if how == "both":
            continue  # one pair can't be given both ways
        code, out = _fire(twice, env, key, event, how, once)
        if then is True:
            assert (code, error_of(out)) == (0, None), (event, out)
            if event != "yield":
                continue
            # yielded: still in WORK (and still held), so the cases go on
        else:
            assert (code, error_of(out)) == (1, f"error: {then}"), (event, out)


@pytest.mark.parametrize("how", SURFACES)
def test_resume_in_the_fallback_state(twice: Path, env: dict[str, str], how: str) -> None:
    key = _in_work(twice, env, "T-2")
    code, out = _fire(twice, env, key, "unmatched", "param", [])
    assert code == 0 and where(out) == f"session {key} · twice › ASIDE · task T-2", out
    code, out = _fire(twice, env, key, "resume", how, [("x", "1"), ("x", "2")])
    assert (code, error_of(out)) == (1, "error: resume got param x more than once"), out
    assert where(out) == f"session {key} · twice › ASIDE · task T-2", out
    code, out = _fire(twice, env, key, "resume", "param", [("x", "1")])
    assert (code, error_of(out)) == (1, "error: resume takes no params, but got x"), out
    code, out = _fire(twice, env, key, "resume", "param", [])
    assert code == 0 and where(out).startswith(f"session {key} · twice › WORK"), out


@pytest.mark.parametrize("how", SURFACES)
def test_in_idle(project: Path, env: dict[str, str], how: str) -> None:
    # enter: each of its params given twice, the others once, in any position
    for pairs, name in [
        ([("stateMachine", "dev"), ("stateMachine", "dev"), ("issueId", "GH-1")], "stateMachine"),
        ([("stateMachine", "dev"), ("issueId", "GH-1"), ("issueId", "GH-2")], "issueId"),
        ([("state", "PLAN"), ("stateMachine", "dev"), ("state", "PLAN")], "state"),
        # before the machine is looked up, and before an unknown param
        ([("stateMachine", "nope"), ("stateMachine", "dev")], "stateMachine"),
        ([("x", "1"), ("stateMachine", "dev"), ("x", "1")], "x"),
    ]:
        code, out = _fire(project, env, None, "enter", how, pairs)
        assert (code, error_of(out)) == (1, f"error: enter got param {name} more than once"), pairs
        assert where(out) == "no session · idle", out
    # resume from idle: the dev machine has no fallback, so unmatched interrupts
    ran = smllm(
        ["fire", "enter", "--param", "stateMachine=dev", "--param", "issueId=GH-7", "--json"],
        project,
        env,
    )
    key = json.loads(ran.out)["session"]
    assert smllm(["fire", "--session", key, "unmatched"], project, env).code == 0
    code, out = _fire(project, env, key, "resume", how, [("x", "1"), ("x", "2")])
    assert (code, error_of(out)) == (1, "error: resume got param x more than once"), out
    assert where(out) == f"session {key} · idle", out
    code, out = _fire(project, env, key, "resume", "param", [("x", "1")])
    assert (code, error_of(out)) == (1, "error: resume takes no params, but got x"), out
    code, out = _fire(project, env, key, "resume", "param", [])
    assert code == 0 and where(out) == f"session {key} · dev › PLAN (visit 2) · issue GH-7", out


def test_where_the_saved_state_is_gone(twice: Path, env: dict[str, str]) -> None:
    key = _in_work(twice, env, "T-3")
    path = twice / ".smllm" / "twice.smllm.yaml"
    path.write_text(TWICE.replace("initial: WORK", "initial: BUSY").replace("WORK", "BUSY"))
    for event in ("pause", "unmatched"):
        for how in SURFACES:
            code, out = _fire(twice, env, key, event, how, [("x", "1"), ("x", "2")])
            assert (code, error_of(out)) == (1, f"error: {event} got param x more than once"), (
                how,
                out,
            )
        code, out = _fire(twice, env, key, event, "param", [("x", "1")])
        assert (code, error_of(out)) == (1, f"error: {event} takes no params, but got x"), out
    assert where(out) == f"session {key} · twice › WORK · task T-3", out


# -- the MCP tool: the raw JSON, with its repeated key, as a client sends it -------------------


def _raw_call(server: McpProcess, key: str | None, event: str, params: str) -> tuple[str, bool]:
    session = f'"session":{json.dumps(key)},' if key else ""
    server.send_raw(
        '{"jsonrpc":"2.0","id":"twice","method":"tools/call","params":{"name":"smllm",'
        f'"arguments":{{{session}"event":{json.dumps(event)},"params":{params}}}}}}}'
    )
    answer = server.read()
    assert answer is not None and answer["id"] == "twice", answer
    result = answer["result"]
    return result["content"][0]["text"], result["isError"]


def test_the_mcp_tool(twice: Path, env: dict[str, str]) -> None:
    with McpProcess(twice, env) as server:
        server.initialize()
        text, is_error = _raw_call(
            server, None, "enter", '{"stateMachine":"twice","taskId":"T-4","taskId":"T-5"}'
        )
        assert (error_of(text), is_error) == ("error: enter got param taskId more than once", True)
        text, is_error = server.tool(
            event="enter", params={"stateMachine": "twice", "taskId": "T-4"}
        )
        assert not is_error, text
        key = text.split("\n")[1].split()[1]
        for event, params, name in [
            ("go", '{"size":"small","size":"large"}', "size"),
            ("go", '{"files":["a"],"size":"small","files":["b"]}', "files"),
            ("done", '{"x":1,"x":1}', "x"),
            ("yield", '{"note":"a","note":null}', "note"),
            ("pause", '{"x":"1","x":"2"}', "x"),
            ("unmatched", '{"x":"1","x":"2"}', "x"),
        ]:
            text, is_error = _raw_call(server, key, event, params)
            want = f"error: {event} got param {name} more than once"
            assert (error_of(text), is_error) == (want, True), (event, params, text)
            assert where(text) == f"session {key} · twice › WORK · task T-4", text
        text, is_error = server.tool(session=key, event="go", params={"size": "large"})
        assert not is_error, text
        assert server.close() == 0


# -- in process (tests/helpers/scenario.py): listPaused, offered only past 10 paused instances,
# and the pause that is all an instance of an unconfigured machine is offered (engine.md §7.2) --


def test_list_paused(tmp_path: Path, env: dict[str, str]) -> None:
    from helpers.scenario import Scenario

    sc = Scenario(tmp_path, "dev")
    key = sc.session()
    for n in range(1, 12):
        assert sc.fire(key, "enter", stateMachine="dev", issueId=f"GH-{n}").ok
        assert sc.fire(key, "pause").ok
    twice = sc.fire(key, "listPaused", ("all", "yes"), ("all", "no"))
    assert (twice.ok, error_of(twice.text())) == (
        False,
        "error: listPaused got param all more than once",
    )
    once = sc.fire(key, "listPaused", ("all", "yes"))
    assert error_of(once.text()) == "error: listPaused takes no params, but got all"
    assert sc.fire(key, "listPaused").ok


def test_where_the_machine_is_not_configured(tmp_path: Path, env: dict[str, str]) -> None:
    """Only a bare pause is taken (§7.2); a pause with params, twice or once, gets the §7.2
    message like every other event."""
    from helpers.scenario import Scenario

    sc = Scenario(tmp_path, "dev", "final")
    key = sc.session()
    assert sc.fire(key, "enter", stateMachine="final", docPath="a.md").ok
    sc.edit("config.toml", '"dev.smllm.yaml", "final.smllm.yaml"', '"dev.smllm.yaml"')
    message = (
        "error: state machine final is not configured (its file might have errors); fix the "
        "config, then fire any event: the session goes on where it was"
    )
    for params in ((("x", "1"), ("x", "2")), (("x", "1"),)):
        for event in ("pause", "unmatched", "close"):
            result = sc.fire(key, event, *params)
            assert (result.ok, error_of(result.text())) == (False, message), (event, params)
    assert sc.fire(key, "pause").ok


# -- a key repeated inside a param's JSON value (issue 20 §8): --param refuses it as its JSON
# text's problem; --params and the MCP tool refuse the call, naming the param and the key -----

INSIDE = '{"files": [{"a": 1, "a": 2}]}'
INSIDE_ERROR = 'params must be a JSON object: param files repeats the key "a" in its value'


def test_a_key_repeated_inside_a_value(twice: Path, env: dict[str, str]) -> None:
    key = _in_work(twice, env, "T-6")
    given = smllm(["fire", "--session", key, "go", "--param", 'files=[{"a":1,"a":2}]'], twice, env)
    assert given.code == 1
    assert error_of(given.out) == (
        "error: go param files must be a JSON value: repeated object key 'a'"
    )
    ran = smllm(["fire", "--session", key, "go", "--params", INSIDE], twice, env)
    assert (ran.code, ran.out, ran.err) == (1, "", f"error: {INSIDE_ERROR}\n")
    deeper = '{"size": "small", "files": [[{"b": {"c": 1, "c": 1}}]]}'
    ran = smllm(["fire", "--session", key, "go", "--params", deeper, "--json"], twice, env)
    assert ran.code == 1 and json.loads(ran.out)["text"] == (
        'error: params must be a JSON object: param files repeats the key "c" in its value'
    )
    with McpProcess(twice, env) as server:
        server.initialize()
        text, is_error = _raw_call(server, key, "go", INSIDE)
        assert (text, is_error) == (f"error: {INSIDE_ERROR}", True)
        assert server.close() == 0
    shown = json.loads(smllm(["instance", "show", "T-6", "--json"], twice, env).out)
    assert [h["event"] for h in shown["history"]] == ["enter"]  # nothing was fired
