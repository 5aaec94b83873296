"""Issue 9's session through the example machine, as the fake model plays it, and the exact
texts smllm must give the agent on the way (from the golden transcript, tests/golden).

Run 1 (prompt FIRST_PROMPT): the session start shows the idle list; the model enters `dev` for
GH-12 (PLAN), ends its turn and is blocked with the events list; fires `planned` before
PLAN.md exists (the guard is false: PLAN again, visit 2); writes PLAN.md with the client's own
tool; fires `planned` (WORK); fires `yield` and ends its turn, which is allowed. Run 2 (prompt
SECOND_PROMPT, the same client session resumed): the prompt clears the yield; the model fires
`done` (DONE, back in idle) and ends its turn freely."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from e2e.fake_model import SESSION, Call, Step

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "transcript.txt"
GOLDEN_KEY = "sm-nqvfvw"

FIRST_PROMPT = "Work on issue GH-12."
SECOND_PROMPT = "The plan is approved; go on with GH-12."
PLAN_TEXT = "Rename the option `--colour` to `--color`.\n"
NOTE = "Waiting for the user to approve the plan."
ENTER = {"stateMachine": "dev", "issueId": "GH-12"}

#: how many steps each run uses up
FIRST_RUN_STEPS = 7
ALL_STEPS = 9


RESUMED_VIEW = """<smllm>
session {{session}} · dev › WORK · issue GH-12
<instructions>
Make the change that PLAN.md describes, then fire done.
</instructions>
Fire one event: smllm({ session: "{{session}}", event, params })
<events>
- done: Fire after you make the change.
- yield: Stop for now and stay in WORK.
    note (optional): What you are waiting for.
- pause: Put issue GH-12 aside and return to idle.
- unmatched: The request fits none of these; handle it from idle, then resume.
</events>
</smllm>"""


def golden_outputs() -> list[str]:
    """The standard output of each `$` step of the golden transcript, with its key as
    `{{session}}`."""
    outputs: list[str] = []
    lines = GOLDEN.read_text().split("\n")
    i = 0
    while i < len(lines):
        if lines[i].startswith("$ "):
            out: list[str] = []
            i += 1
            while not re.fullmatch(r"\[exit \d+\]", lines[i]):
                out.append(lines[i] + "\n")
                i += 1
            outputs.append("".join(out).replace(GOLDEN_KEY, SESSION))
        i += 1
    return outputs


class Texts:
    """The blocks the agent must see, `{{session}}` standing for the key (`for_key` fills it).
    Each is the block alone, without the final newline a CLI prints."""

    def __init__(self) -> None:
        out = [o.rstrip("\n") for o in golden_outputs()]
        self.idle = out[0]  # the session start of a new session
        self.entered = out[1]  # enter dev GH-12 → PLAN
        # a blocked stop: the view of PLAN without its instructions (agent-text.md §7)
        self.blocked = re.sub(r"<instructions>\n.*?</instructions>\n", "", out[2], flags=re.S)
        self.reentered = out[5]  # planned, guard false → PLAN (visit 2)
        self.work = out[7]  # planned, guard true → WORK
        self.yielded = out[8]
        self.done = out[11]  # done → DONE, back in idle
        # a resumed client session starts again: the view of WORK (as the transcript's of PLAN)
        self.resumed = RESUMED_VIEW

    def for_key(self, key: str) -> dict[str, str]:
        return {name: text.replace(SESSION, key) for name, text in vars(self).items()}


def fire(event: str, **params: Any) -> Call:
    arguments: dict[str, Any] = {"session": SESSION, "event": event}
    if params:
        arguments["params"] = params
    return Call("smllm", arguments)


def steps(write_plan: Call, as_stop_reason: Callable[[str], str]) -> list[Step]:
    """The model's side. WRITE_PLAN is the client's own tool call writing PLAN.md;
    AS_STOP_REASON gives a text as the client passes a stop hook's reason on."""
    t = Texts()
    return [
        Step((t.idle,), "Entering dev.", (fire("enter", **ENTER),), "session start, enter"),
        Step((t.entered,), "I have the instructions.", (), "entered PLAN, try to stop"),
        Step(
            (as_stop_reason(t.blocked),),
            "",
            (fire("planned", size="small"),),
            "stop blocked, planned",
        ),
        Step((t.reentered,), "Writing the plan.", (write_plan,), "guard false, write PLAN.md"),
        Step((), "", (fire("planned", size="small"),), "PLAN.md written, planned"),
        Step((t.work,), "", (fire("yield", note=NOTE),), "in WORK, yield"),
        Step((t.yielded,), "Please approve the plan.", (), "yielded, stop"),
        Step((SECOND_PROMPT,), "", (fire("done"),), "second prompt, done"),
        Step((t.done,), "Renamed the option.", (), "done, stop"),
    ]
