"""Checks that read more than the machine file: its prompt files (MCH-11, AGT-1), the implied
`enter-STATE.md` files (AGT-1, AGT-5) and command folders (MCH-19). validation.md marks all but
MCH-11 *validate only*; they run whenever a file is parsed (only on a cache miss), and the
files they read join the cache key, so `validate` never shows stale findings."""

from __future__ import annotations

import os

from ..model import Action, Machine

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..model import IdlePrompt
    from .lint import Broken

    Add = Callable[..., None]
    from ..findings import Path_

__all__ = [
    "CLOSING_TAGS",
    "MAX_PROMPT_BYTES",
    "check_files",
    "closing_tag",
    "idle_problems",
    "read_text",
]

#: agent-text.md §1: author text holding one of these would close smllm's block (AGT-1)
CLOSING_TAGS = ("</smllm>", "</instructions>", "</events>")


def closing_tag(text: str) -> str | None:
    """The first closing tag in `text`, ASCII case ignored, or None."""
    low = text.lower()
    return next((tag for tag in CLOSING_TAGS if tag in low), None)


#: the largest prompt file read: a prompt is read into the agent's context on every entry
MAX_PROMPT_BYTES = 1 << 20


def read_text(path: str) -> tuple[str | None, str | None]:
    """(text, problem) of a prompt file; problem "missing" when it doesn't exist. Only a regular
    file of at most MAX_PROMPT_BYTES is read (files.py: a FIFO or /dev/zero is refused)."""
    from ...files import read_regular

    data, problem = read_regular(path, MAX_PROMPT_BYTES)
    if data is None:
        return None, problem
    try:
        # a leading BOM (some editors write one) is not text for the agent
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError:
        return None, "not UTF-8"


def check_files(
    machine: Machine,
    prompts: list[tuple[Path_, Action]],
    cwds: list[tuple[Path_, str]],
    add: Add,
    broken: Broken,
) -> list[str]:
    """Report on the files the machine names; returns every file and folder looked at. Where
    the machine has errors (`broken`), a state's implied prompt and AGT-5 are checked only
    when what decides them reads cleanly."""
    reads: list[str] = []
    texts: list[tuple[Path_, str, bool]] = []  # (where, author text, at the key)
    for path, action in prompts:
        if action.text is not None:
            texts.append((path, action.text, False))
            continue
        assert action.file is not None
        reads.append(action.file)
        text, problem = read_text(action.file)
        if problem == "missing":
            add("MCH-11", path, f"no prompt file {action.file_shown}")
        elif problem is not None:
            add("MCH-11", path, f"prompt file {action.file_shown}: {problem}")
        else:
            assert text is not None
            texts.append((path, text, False))
    shared_broken = broken.under("meta", "sharedActions")
    for name, state in machine.states.items():
        # a malformed prompt in the entry is left out of the machine: the implied file and
        # "no instructions" would both be guesses
        if broken.under("states", name, "entry"):
            continue
        implied = None
        if state.implied_prompt is not None:
            reads.append(state.implied_prompt)
            implied, _problem = read_text(state.implied_prompt)
            if implied is not None:
                texts.append((("states", name), implied, True))
        shared = [a for s in machine.shared if name in s.states for a in s.entry]
        prompted = any(a.kind == "prompt" for a in (*state.entry, *shared)) or bool(implied)
        # a malformed sharedActions entry may be the one that prompts in this state
        if not state.final and not state.always and not prompted and not shared_broken:
            add("AGT-5", ("states", name), f"the agent gets no instructions in {name}", at_key=True)
    for path, text, at_key in texts:
        tag = closing_tag(text)
        if tag is not None:
            add(
                "AGT-1",
                path,
                f"prompt text contains {tag}, which would close smllm's block",
                at_key=at_key,
            )
    folder = os.path.dirname(machine.file)
    for path, cwd in cwds:
        reads.append(cwd)
        if not os.path.isdir(cwd):
            add("MCH-19", path, f"cwd {os.path.relpath(cwd, folder)} doesn't exist")
    return reads


def idle_problems(idle: IdlePrompt) -> list[tuple[str, str]]:
    """(rule, message) of a config's `[idle] on-enter`, for validate only: its file must be
    readable (CFG-9) and its text must not close smllm's block (AGT-1). At run time a missing
    file is `Prompt failed`, so it never keeps a config from loading."""
    out = []
    text = idle.text
    if idle.file is not None:
        text, problem = read_text(idle.file)
        if problem == "missing":
            out.append(("CFG-9", f"no prompt file {idle.shown}"))
        elif problem is not None:
            out.append(("CFG-9", f"prompt file {idle.shown}: {problem}"))
    tag = closing_tag(text or "")
    if tag is not None:
        out.append(("AGT-1", f"prompt text contains {tag}, which would close smllm's block"))
    return out
