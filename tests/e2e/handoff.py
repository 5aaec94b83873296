"""Issue 20 §4's handoff: one issue carried through the example machine by four real clients in
turn, in ONE project and ONE HOME (so one smllm store), each a new client session that picks
the instance up where the previous one left it. What the fake model plays, and the exact texts
smllm owes each client's agent on the way (derived from the golden transcript, tests/golden,
like scenario.py's).

1. Claude Code: its session start shows the idle list; the model enters dev for GH-12 (PLAN),
   ends its turn with text only and is blocked once; fires `pause` (idle, GH-12 paused at PLAN)
   and ends its turn, which is allowed.
2. Codex: its session start shows the idle list with GH-12 paused; the model enters it with its
   ref (continued at PLAN, visit 2), writes PLAN.md, fires `planned` (WORK), tries to stop and
   is blocked once; fires `yield` and stops.
3. Copilot CLI: the idle list (GH-12 is Codex's, so no longer paused); the model enters GH-12:
   smllm takes it over from Codex's session at once (engine.md §5.1, no confirmation) and
   says so in a note; a text-only stop is blocked once; it fires `yield` and stops.
4. OpenCode (`serve` + `run --attach`): enters GH-12, taking it over from Copilot's session;
   its text-only stop makes the plugin re-prompt with the block; it fires `done` (DONE, back in
   idle) and stops freely.

`{{session}}` stands for the current client's session key (the fake model fills it from the
latest header it was sent); a takeover's note names the previous holder and its `holderSeen`,
which the test reads from the store before that client runs (`Previous`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from e2e.fake_model import Call, Step
from e2e.scenario import ENTER, NOTE, RESUMED_VIEW, Texts, fire, golden_outputs

#: the clients in the order they take the issue up
ORDER = ("claude", "codex", "copilot", "opencode")
PROMPTS = {
    "claude": "Work on issue GH-12.",
    "codex": "Claude Code paused issue GH-12; continue it.",
    "copilot": "Take issue GH-12 over from Codex.",
    "opencode": "Finish issue GH-12.",
}
PLAN_TEXT = "Rename the option `--colour` to `--color`.\n"
SUMMARY = "Renamed the option."
#: the paused line of the idle list once Claude Code paused GH-12
PAUSED_LINE = "Paused:\n- issue GH-12 (dev) at PLAN\n"
BLOCK = re.compile(r"<smllm>\n.*?\n</smllm>", re.S)


def swap(text: str, old: str, new: str) -> str:
    """TEXT with its one OLD replaced by NEW (a golden text that changed fails loudly here)."""
    assert text.count(old) == 1, (old, text)
    return text.replace(old, new)


def at_visit(text: str, state: str, visit: int) -> str:
    """A block of STATE whose header shows VISIT (from 2 on, agent-text.md §2)."""
    return swap(text, f"dev › {state} · ", f"dev › {state} (visit {visit}) · ")


def no_instructions(text: str) -> str:
    """A blocked stop's text: the view without its instructions (agent-text.md §7)."""
    return re.sub(r"<instructions>\n.*?</instructions>\n", "", text, flags=re.S)


@dataclass(frozen=True)
class Previous:
    """The session an instance is taken over from, as the takeover's note names it."""

    key: str
    seen: str  # its holderSeen, as `YYYY-MM-DD HH:MM UTC`


class HandoffTexts:
    """The blocks of the handoff, `{{session}}` standing for the key of the client's session."""

    def __init__(self) -> None:
        t = Texts()
        out = [o.rstrip("\n") for o in golden_outputs()]
        fire_line = "Fire one event: smllm({"
        self.idle = t.idle
        # Claude Code
        self.entered = t.entered  # enter dev GH-12: a new issue, PLAN
        self.blocked_plan = t.blocked
        self.idle_paused = swap(t.idle, fire_line, PAUSED_LINE + fire_line)
        self.paused = swap(self.idle_paused, "· idle\n", "· idle\nPaused issue GH-12 at PLAN.\n")
        # Codex: enter continues GH-12 at its saved state, PLAN
        self.continued = at_visit(swap(t.entered, " (new issue)\n", "\n"), "PLAN", 2)
        self.work = t.work  # planned, guard true: WORK
        # Copilot (visit 2 of WORK) and OpenCode (visit 3): the golden `enter` that continues
        # GH-12 at WORK, visit 2, and the takeover's note after its params
        self.continued_work = out[10]
        self.work_view = RESUMED_VIEW
        self.done = t.done  # done: DONE, completed, back in idle

    def work_view_at(self, visit: int) -> str:
        """The view of WORK (`smllm session show`) at VISIT."""
        return self.work_view if visit == 1 else at_visit(self.work_view, "WORK", visit)

    def blocked_work(self, visit: int) -> str:
        return no_instructions(self.work_view_at(visit))

    def yielded(self, visit: int) -> str:
        text = Texts().yielded  # the golden yield in WORK, visit 1
        return text if visit == 1 else at_visit(text, "WORK", visit)

    def took_over(self, visit: int, previous: Previous) -> str:
        text = swap(self.continued_work, "(visit 2)", f"(visit {visit})")
        note = f"Took over from session {previous.key} (last active {previous.seen})"
        return swap(text, '"GH-12"\n', f'"GH-12"\n{note}\n')

    def seen_by(self, name: str, previous: Previous | None) -> list[tuple[str, str]]:
        """Every block NAME's agent is sent, in order, with how it comes: `start` (the
        session start's context), `tool` (a result of the smllm tool) or `stop` (a blocked
        stop's reason, as the client passes it on)."""
        if name == "claude":
            blocks = [self.idle, self.entered, self.blocked_plan, self.paused]
        elif name == "codex":
            blocks = [
                self.idle_paused,
                self.continued,
                self.work,
                self.blocked_work(1),
                self.yielded(1),
            ]
        else:
            assert previous is not None, name
            visit = 2 if name == "copilot" else 3
            last = self.yielded(2) if name == "copilot" else self.done
            blocks = [self.idle, self.took_over(visit, previous), self.blocked_work(visit), last]
        kinds = ["start", *["tool"] * (len(blocks) - 3), "stop", "tool"]
        return list(zip(blocks, kinds, strict=True))


def steps(
    name: str,
    write_plan: Call,
    as_stop_reason: Callable[[str], str],
    previous: Previous | None,
) -> list[Step]:
    """The model's side of NAME's part. WRITE_PLAN is the client's own tool call writing
    PLAN.md; AS_STOP_REASON gives a text as the client passes a stop hook's reason on;
    PREVIOUS is the session Copilot and OpenCode take GH-12 over from."""
    t = HandoffTexts()
    prompt = PROMPTS[name]
    enter = fire("enter", **ENTER)
    if name == "claude":
        return [
            Step((prompt, t.idle), "Entering dev.", (enter,), "session start, enter"),
            Step((t.entered,), "I have the instructions.", (), "entered PLAN, try to stop"),
            Step((as_stop_reason(t.blocked_plan),), "", (fire("pause"),), "stop blocked, pause"),
            Step((t.paused,), "Paused GH-12 for another agent.", (), "paused, stop"),
        ]
    if name == "codex":
        return [
            Step((prompt, t.idle_paused), "", (enter,), "session start, enter paused GH-12"),
            Step((t.continued,), "Writing the plan.", (write_plan,), "continued PLAN, write"),
            Step((), "", (fire("planned", size="small"),), "PLAN.md written, planned"),
            Step((t.work,), "The plan is written.", (), "in WORK, try to stop"),
            Step(
                (as_stop_reason(t.blocked_work(1)),),
                "",
                (fire("yield", note=NOTE),),
                "stop blocked, yield",
            ),
            Step((t.yielded(1),), "Please approve the plan.", (), "yielded, stop"),
        ]
    assert previous is not None, name
    visit = 2 if name == "copilot" else 3
    took_over = t.took_over(visit, previous)
    if name == "copilot":
        last, event, end, text = fire("yield", note=NOTE), "yield", t.yielded(2), "Yielded."
    else:
        last, event, end, text = fire("done"), "done", t.done, SUMMARY
    return [
        Step((prompt, t.idle), "", (enter,), "session start, take GH-12 over"),
        Step((took_over,), "I have GH-12.", (), "took over WORK, try to stop"),
        Step((as_stop_reason(t.blocked_work(visit)),), "", (last,), f"stop blocked, {event}"),
        Step((end,), text, (), f"{event}, stop"),
    ]


def blocks_in(strings: list[str], unescape: Callable[[str], str]) -> list[str]:
    """Every distinct `<smllm>` block inside STRINGS (each first seen as UNESCAPE gives it),
    in the order they first appear."""
    found: list[str] = []
    for s in strings:
        for block in BLOCK.findall(unescape(s)):
            if block not in found:
                found.append(block)
    return found
