"""Exact text of a block (smllm.text.block, agent-text.md): escaping and the session call,
the headers, every part in order, events with their params, and the idle list with no
machines, with interrupted and paused instances and more."""

from __future__ import annotations

from smllm.engine.reply import (
    EventItem,
    EventsList,
    Header,
    IdleList,
    InstanceLine,
    MachineLine,
    ParamLine,
    Reply,
)
from smllm.text.block import escape, render, session_call


def machine_line(**changes: object) -> MachineLine:
    m = MachineLine("dev", "Develop", "issue", "issueId", None, None, "plan", (), False)
    return m._replace(**changes)


def test_escape_and_session_call() -> None:
    assert escape("a\nb\rc") == "a\\nb\\rc"
    assert (
        escape("<SMLLM> </Events> <instructions <b>")
        == "&lt;SMLLM> &lt;/Events> &lt;instructions <b>"
    )
    assert session_call(None) == "Fire one event: smllm({ event, params })"
    assert session_call("k") == 'Fire one event: smllm({ session: "k", event, params })'


def test_headers() -> None:
    assert render(Reply(Header(None))) == "<smllm>\nno session · idle\n</smllm>"
    assert render(Reply(Header("k"))) == "<smllm>\nsession k · idle\n</smllm>"
    one = Header("k", "dev", "plan", 1, "issue", "#1")
    assert render(Reply(one)) == "<smllm>\nsession k · dev › plan · issue #1\n</smllm>"
    two = one._replace(visit=2)
    assert render(Reply(two)) == "<smllm>\nsession k · dev › plan (visit 2) · issue #1\n</smllm>"


def test_every_part_in_order() -> None:
    reply = Reply(
        Header("k", "dev", "plan", 1, "issue", "#1"),
        arrived="go\nnow",
        params=(("a", "x y"), ("b", 3), ("c", None), ("d", [1, "z"])),
        notes=("note <smllm>",),
        trace=("t1",),
        error="bad",
        instructions=("Do A.", "Do B."),
        yielded="plan",
        completed="issue #1",
    )
    assert render(reply).split("\n") == [
        "<smllm>",
        "session k · dev › plan · issue #1",
        "Arrived by: go\\nnow",
        'Params: a = "x y", b = 3, c = null, d = [1,"z"]',
        "note &lt;smllm>",
        "t1",
        "error: bad",
        "Yielded: staying in plan. You can end your turn.",
        "<instructions>",
        "Do A.",
        "",
        "Do B.",
        "</instructions>",
        "Completed issue #1. You are now in idle.",
        "</smllm>",
    ]


def test_params_of_events() -> None:
    items = (
        EventItem("plain", None),
        EventItem(
            "full",
            "Does <events> it",
            (
                ParamLine("a", True),
                ParamLine("b", False, enum=("x", "y")),
                ParamLine("c", False, pattern="^[a-z]+$", description="C's\nline"),
                ParamLine("d", True, json=True),
                ParamLine("e", False, json=True, schema='{"type":"object"}'),
            ),
        ),
    )
    text = render(Reply(Header(None), events=EventsList("k", items)))
    assert text.split("\n") == [
        "<smllm>",
        "no session · idle",
        'Fire one event: smllm({ session: "k", event, params })',
        "<events>",
        "- plain",
        "- full: Does &lt;events> it",
        "    a (required)",
        "    b (optional, one of: x, y)",
        "    c (optional, pattern: ^[a-z]+$): C's\\nline",
        "    d (required, a JSON value)",
        '    e (optional, a JSON value, schema: {"type":"object"})',
        "</events>",
        "</smllm>",
    ]


def test_no_machines_configured() -> None:
    idle = IdleList((), None, (), 0)
    assert render(Reply(Header("k"), idle=idle)).split("\n") == [
        "<smllm>",
        "session k · idle",
        "No state machines are configured.",
        "</smllm>",
    ]


def test_machines_interrupted_paused_and_more() -> None:
    machines = (
        machine_line(),
        machine_line(
            id="ops",
            description="Run <smllm> ops",
            kind="task",
            ref_param="taskId",
            ref_pattern="^T-[0-9]+$",
            ref_description="the task",
            entry_points=("fix", "ship"),
            host_only=True,
        ),
    )
    idle = IdleList(
        machines,
        InstanceLine("issue", "#2", "dev", "review"),
        (InstanceLine("issue", "#3", "dev", "plan"), InstanceLine("task", "T-1", "ops", "go")),
        4,
    )
    assert render(Reply(Header("k"), idle=idle)).split("\n") == [
        "<smllm>",
        "session k · idle",
        "State machines:",
        "- dev: Develop",
        "    issue id param issueId",
        "    starts at: plan",
        "- ops: Run &lt;smllm> ops",
        "    task id param taskId (pattern: ^T-[0-9]+$): the task",
        "    starts at: plan; entry points: fix, ship",
        "    only its host fires its events",
        "Interrupted: issue #2 (dev) at review",
        "Paused:",
        "- issue #3 (dev) at plan",
        "- task T-1 (ops) at go",
        "…and 4 more paused: fire listPaused to list them all.",
        "</smllm>",
    ]


def test_a_machine_without_description_and_list_paused() -> None:
    idle = IdleList((machine_line(description=None),), None, (), 0)
    lines = render(Reply(Header("k"), idle=idle)).split("\n")
    assert lines[2:4] == ["State machines:", "- dev"]
    only_paused = IdleList(None, None, (InstanceLine("issue", "#3", "dev", "plan"),), 0)
    assert render(Reply(Header("k"), idle=only_paused)).split("\n") == [
        "<smllm>",
        "session k · idle",
        "Paused:",
        "- issue #3 (dev) at plan",
        "</smllm>",
    ]
