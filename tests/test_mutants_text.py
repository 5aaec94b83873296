"""Exact text of smllm.text's renderers, written to kill the mutants that scripts/mutation found
surviving in src/smllm/text/ (issue 12 §4): every branch of a block's parts, the listings of
`session list`, `session show --audit`, `instance list|show`, and the status line."""

from __future__ import annotations

from smllm.engine.records import AuditRecord, HistoryRecord, Instance, Place, Session
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
from smllm.engine.status import Status
from smllm.text.block import escape, render, session_call
from smllm.text.listing import (
    InstanceDetail,
    SessionLine,
    audit_text,
    instance_table,
    instance_text,
    session_table,
    table,
    where,
)
from smllm.text.statusline import render_status

AT = "2026-03-04T05:06:07.890123+00:00"
LATER = "2026-03-05T10:11:12.000000+00:00"


def inst(
    ref: str | None = "#12",
    state: str = "plan",
    status: str = "active",
    holder: str | None = "s1",
    visits: dict[str, int] | None = None,
    machine: str = "dev",
) -> Instance:
    return Instance(
        "i-1",
        machine,
        ref,
        state,
        status,
        holder,
        None,
        3,
        {"plan": 2} if visits is None else visits,
        None,
        AT,
        LATER,
    )


def session(holding: Place | None = None, interrupted: Place | None = None) -> Session:
    return Session(
        "s1", "claude", None, "/work/p", ("a.toml",), holding, interrupted, False, 0, 1, AT, LATER
    )


def machine_line(**changes: object) -> MachineLine:
    m = MachineLine("dev", "Develop", "issue", "issueId", None, None, "plan", (), False)
    return m._replace(**changes)


# --- block.py ---------------------------------------------------------------------------------


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


# --- listing.py -------------------------------------------------------------------------------


def test_table_pads_all_but_the_last_column() -> None:
    assert table([]) == ""
    assert table([["a", "bbb", "c"], ["dddd", "e", "f\ng"]]) == (
        "a     bbb  c\n" + "dddd  e    f\\ng\n"
    )
    assert table([["only"]]) == "only\n"


def test_where_and_session_table() -> None:
    held = inst()
    idle = SessionLine(session(), None, None, None, None)
    holding = SessionLine(session(Place("dev", "i-1")), held, None, "issue", None)
    broken = SessionLine(session(Place("dev", "i-1")), None, None, None, "store broken")
    assert where(idle) == "idle"
    assert where(holding) == "dev › plan · issue #12"
    assert where(broken) == "?"
    assert session_table([idle, holding]) == (
        "s1  idle                    claude  2026-03-05 10:11 UTC  /work/p\n"
        "s1  dev › plan · issue #12  claude  2026-03-05 10:11 UTC  /work/p\n"
    )


def test_session_line_json() -> None:
    base = session().to_json()
    idle = SessionLine(session(), None, None, None, None)
    assert idle.to_json() == {**base, "holding": None}
    held, slot = inst(), inst(ref=None, state="review", status="interrupted")
    line = SessionLine(session(Place("dev", "i-1"), Place("dev", "i-2")), held, slot, "issue", None)
    assert line.to_json() == {
        **base,
        "holding": {"machine": "dev", "id": "i-1", "label": "#12", "state": "plan"},
        "interrupted": {"machine": "dev", "id": "i-2", "label": "i-1", "state": "review"},
    }
    gone = SessionLine(session(Place("dev", "i-1"), Place("dev", "i-2")), None, None, None, None)
    assert gone.to_json() == {
        **base,
        "holding": None,
        "interrupted": {"machine": "dev", "id": "i-2", "label": None, "state": None},
    }
    slot_only = SessionLine(session(None, Place("dev", "i-2")), None, slot, None, None)
    assert slot_only.to_json() == {
        **base,
        "holding": None,
        "interrupted": {"machine": "dev", "id": "i-2", "label": "i-1", "state": "review"},
    }
    broken = SessionLine(session(Place("dev", "i-1")), None, None, None, "broken")
    assert broken.to_json() == {
        **base,
        "holding": {"machine": "dev", "id": "i-1", "label": None, "state": None},
    }


def test_instance_table() -> None:
    rows = [inst(), inst(ref=None, holder=None, status="paused", machine="ops")]
    assert instance_table(rows) == (
        "dev  #12  plan  active  s1  2026-03-05 10:11 UTC\n"
        "ops  i-1  plan  paused  -   2026-03-05 10:11 UTC\n"
    )


def test_audit_text_of_every_kind() -> None:
    records = [
        AuditRecord(AT, "bind", {"harness": "claude", "cwd": "/p"}),
        AuditRecord(
            AT,
            "event",
            {"event": "enter", "machine": "dev", "label": "#1", "from": None, "to": "plan"},
        ),
        AuditRecord(
            AT,
            "event",
            {
                "event": "done",
                "source": "host",
                "machine": "dev",
                "label": "#1",
                "from": "plan",
                "to": "end",
            },
        ),
        AuditRecord(AT, "event", {"event": "x", "source": "agent", "to": "b", "from": "a"}),
        AuditRecord(AT, "block", {"machine": "dev", "state": "s", "kind": "issue", "label": "#1"}),
        AuditRecord(AT, "runaway", {"machine": "dev", "state": "s", "label": "#1"}),
        AuditRecord(AT, "moved", {"message": "went\naway"}),
        AuditRecord(AT, "prompt", {"a": 1, "b": "two"}),
    ]
    assert audit_text(records).split("\n") == [
        "2026-03-04 05:06:07 UTC  bind  claude /p",
        "2026-03-04 05:06:07 UTC  event  enter dev #1 - → plan",
        "2026-03-04 05:06:07 UTC  event  done (host) dev #1 plan → end",
        "2026-03-04 05:06:07 UTC  event  x None None a → b",
        "2026-03-04 05:06:07 UTC  block  dev s issue #1",
        "2026-03-04 05:06:07 UTC  runaway  dev s None #1",
        "2026-03-04 05:06:07 UTC  moved  went\\naway",
        "2026-03-04 05:06:07 UTC  prompt  a=1, b=two",
        "",
    ]
    assert audit_text([]) == ""


def test_instance_text() -> None:
    history = [
        HistoryRecord(AT, "s1", "agent", "enter", {}, None, "plan", None, "active", 1, ()),
        HistoryRecord(
            LATER,
            "s2",
            "host",
            "next",
            {"why": "a\nb", "n": 2},
            "plan",
            "plan",
            "by <smllm> way",
            "paused",
            2,
            ("line one", "line\ntwo"),
        ),
    ]
    detail = InstanceDetail(
        inst(ref="<events>", holder=None, visits={"plan": 2, "a": 1}), "issue", history
    )
    assert instance_text(detail).split("\n") == [
        "dev issue &lt;events> (i-1)",
        "state: plan  status: active  holder: -  version: 3",
        "visits: plan 2, a 1",
        "created: 2026-03-04 05:06 UTC  updated: 2026-03-05 10:11 UTC",
        "history:",
        "  2026-03-04 05:06:07 UTC  enter (agent, s1)  - → plan  active v1",
        "  2026-03-05 10:11:12 UTC  next (host, s2)  plan → plan  paused v2",
        "    Arrived by: by &lt;smllm> way",
        '    Params: {"why": "a\\nb", "n": 2}',
        "    line one",
        "    line\\ntwo",
        "",
    ]
    held = InstanceDetail(inst(), "issue", [])
    assert instance_text(held).split("\n")[:2] == [
        "dev issue #12 (i-1)",
        "state: plan  status: active  holder: s1  version: 3",
    ]


# --- statusline.py ----------------------------------------------------------------------------


def status(**changes: object) -> Status:
    s = Status("s1", None, None, False, None, None, 0)
    return s._replace(**changes)


def test_status_in_a_machine() -> None:
    first = status(held=inst(visits={}), kind="issue")
    assert render_status(first, False) == "smllm dev › plan · issue #12"
    # a count of 0 (never stored so) reads as the first visit too
    zero = status(held=inst(visits={"plan": 0}), kind="issue")
    assert render_status(zero, False) == "smllm dev › plan · issue #12"
    again = status(held=inst(ref="a\nb"), kind="issue", yielded=True)
    assert render_status(again, False) == "smllm dev › plan (visit 2) · issue a\\nb · yielded"
    assert render_status(again, True) == (
        "\x1b[2msmllm\x1b[0m \x1b[36mdev\x1b[0m › \x1b[1mplan\x1b[0m (visit 2)"
        " · \x1b[35missue a\\nb\x1b[0m · \x1b[33myielded\x1b[0m"
    )


def test_status_in_idle() -> None:
    assert render_status(status(), False) == "smllm idle"
    assert render_status(status(), True) == "\x1b[2msmllm\x1b[0m idle"
    slot = status(interrupted=inst(ref="<smllm>"), interrupted_kind="issue", paused=3)
    assert render_status(slot, False) == "smllm idle · interrupted issue &lt;smllm> · 3 paused"
    assert render_status(slot, True) == (
        "\x1b[2msmllm\x1b[0m idle · interrupted \x1b[35missue &lt;smllm>\x1b[0m · 3 paused"
    )
