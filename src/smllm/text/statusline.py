"""The text of `smllm statusline` (cli-and-harnesses.md §7): one line, coloured on request.

- In a machine: `smllm MACHINE › STATE[ (visit N)] · KIND LABEL[ · yielded]`.
- In idle: `smllm idle[ · interrupted KIND LABEL][ · N paused]`.
Every value from outside is one line (`escape.escape`), so a ref can't break the status line.
"""

from __future__ import annotations

from .escape import escape

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from ..engine.status import Status

__all__ = ["DIM", "RESET", "render_status"]

#: ANSI SGR codes of §7's colours
DIM, BOLD, CYAN, MAGENTA, YELLOW, RESET = (
    "\x1b[2m",
    "\x1b[1m",
    "\x1b[36m",
    "\x1b[35m",
    "\x1b[33m",
    "\x1b[0m",
)


def render_status(status: Status, color: bool) -> str:
    def paint(code: str, text: str) -> str:
        return f"{code}{text}{RESET}" if color else text

    parts = [paint(DIM, "smllm")]
    held = status.held
    if held is not None:
        visit = status.visit or 1
        state = paint(BOLD, escape(held.state)) + (f" (visit {visit})" if visit > 1 else "")
        line = f"{parts[0]} {paint(CYAN, escape(held.machine))} › {state}"
        line += " · " + paint(MAGENTA, f"{status.kind} {escape(held.label)}")
        if status.yielded:
            line += " · " + paint(YELLOW, "yielded")
        return line
    line = f"{parts[0]} idle"
    slot = status.interrupted
    if slot is not None:
        line += " · interrupted " + paint(
            MAGENTA, f"{status.interrupted_kind} {escape(slot.label)}"
        )
    if status.paused:
        line += f" · {status.paused} paused"
    return line
