"""The instructions part: smllm's marker region in AGENTS.md, CLAUDE.md or a client's user file,
and the rule that picks Claude's file (cli-and-harnesses.md §6).

The region is the text between `<!-- smllm:harness -->` and `<!-- /smllm:harness -->`, each on
its own line: the one a closing marker ends, opened by the nearest opening marker before it (a
stray opening marker earlier in the file stays the user's text). The text is the same for every
harness, so several harnesses share one region. Line endings of the file are kept.
"""

from __future__ import annotations

import os

__all__ = [
    "BLOCK",
    "CLOSE",
    "OPEN",
    "claude_target",
    "drop_region",
    "put_region",
    "region_state",
]

OPEN = "<!-- smllm:harness -->"
CLOSE = "<!-- /smllm:harness -->"

#: the block every harness shares (cli-and-harnesses.md §6, "The instructions region")
BLOCK = (
    "## smllm\n"
    "\n"
    "This project's work is guided by smllm state machines. smllm answers in one `<smllm>` "
    "block: its first line names your session key (`sm-…`) and where you are, `<instructions>` "
    "says what to do now, and `<events>` lists the events you can fire. Do what the instructions "
    "say, then fire exactly one listed event with the `smllm` tool, `{ session, event, params }`, "
    "or, without the tool, with `smllm fire --session KEY EVENT --param NAME=VALUE` in a shell. "
    "Always pass the key from the latest header. If nothing has given you a key yet, fire "
    "`enter` without a session; with no params, its reply names the state machines. Before you "
    "end your turn to ask the user something or to wait for them, fire `yield`; fire `pause` to "
    "set the work aside. To see where you are, call the tool with only `{ session }`, or run "
    "`smllm session show KEY`. Only the main agent calls smllm; don't give the key to "
    "subagents.\n"
)

#: the region as written (LF endings; a CRLF file gets CRLF)
REGION = f"{OPEN}\n\n{BLOCK}{CLOSE}\n"


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _find(text: str) -> tuple[int, int] | None:
    """The region's span in `text` (from its opening marker's line start to the end of its
    closing marker's line), or None."""
    lines = text.splitlines(keepends=True)
    starts = []
    at = 0
    for line in lines:
        starts.append(at)
        at += len(line)
    opened: int | None = None
    for i, line in enumerate(lines):
        mark = line.strip()
        if mark == OPEN:
            opened = i  # the nearest opening marker wins; earlier ones stay user text
        elif mark == CLOSE and opened is not None:
            return starts[opened], starts[i] + len(line)
    return None


def _words(text: str) -> list[str]:
    return text.split()


def region_state(text: str | None) -> str:
    """`current`, `missing` or `edited` (the region compared word by word)."""
    span = None if text is None else _find(text)
    if text is None or span is None:
        return "missing"
    return "current" if _words(text[span[0] : span[1]]) == _words(REGION) else "edited"


def put_region(text: str | None) -> str:
    """`text` with smllm's region in place: the existing region replaced, else appended after
    one blank line; an empty or absent file becomes just the region."""
    text = text or ""
    nl = _newline(text)
    region = REGION.replace("\n", nl)
    span = _find(text)
    if span is not None:
        end_nl = text[span[0] : span[1]].endswith(("\n", "\r"))
        return text[: span[0]] + (region if end_nl else region.rstrip("\r\n")) + text[span[1] :]
    if not text.strip():
        return region
    if not text.endswith(("\n", "\r")):
        text += nl
    if not text.endswith(nl + nl):
        text += nl
    return text + region


def drop_region(text: str | None) -> str:
    """`text` without smllm's region (and the blank line put before it)."""
    text = text or ""
    span = _find(text)
    if span is None:
        return text
    before, after = text[: span[0]], text[span[1] :]
    if not after:
        nl = _newline(text)
        while before.endswith(nl + nl):
            before = before[: -len(nl)]
    return before + after


def claude_target(folder: str) -> str:
    """Claude's instructions file in `folder`: no AGENTS.md → CLAUDE.md (created if absent);
    only AGENTS.md → AGENTS.md; both, and CLAUDE.md has a line `@AGENTS.md` → AGENTS.md; both
    without it → CLAUDE.md."""
    agents = os.path.join(folder, "AGENTS.md")
    claude = os.path.join(folder, "CLAUDE.md")
    if not os.path.lexists(agents):
        return claude
    if not os.path.lexists(claude):
        return agents
    from ...files import read_regular

    data, _problem = read_regular(claude)  # a FIFO is never opened
    if data is None:
        return claude
    if any(line.strip() == "@AGENTS.md" for line in data.decode("utf-8", "replace").splitlines()):
        return agents
    return claude
