"""Exact text of the listings (smllm.text.listing): `session list` (table and JSON),
`session show --audit`, `instance list` and `instance show`; and of the status line
(smllm.text.statusline) in a machine and in idle. The commands themselves: test_cli.py,
test_statusline.py."""

from __future__ import annotations

from smllm.engine.records import AuditRecord, HistoryRecord, Instance, Place, Session
from smllm.engine.status import Status
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


# --- listing.py -----------------------------------------------------------------------------------


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


# --- statusline.py --------------------------------------------------------------------------------


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
