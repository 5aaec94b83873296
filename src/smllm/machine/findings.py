"""Findings: what a check says about a config, a machine file or the store (validation.md)."""

from __future__ import annotations

from ..recordclass import Record

__all__ = ["HINTS", "Finding", "Path_", "format_path", "one_line"]

#: where in a file a finding points: its keys and indexes from the top
Path_ = tuple[str | int, ...]

#: validation.md §2: the fixed hint of each rule; rules whose hint depends on the file get it
#: at the finding instead.
HINTS: dict[str, str] = {
    "CFG-1": "fix the TOML syntax at this line",
    "CFG-2": "allowed: [machines] files, [idle] on-enter, [state] dir, url, url-env, namespace, "
    "[harness.NAME] without",
    "CFG-3": "paths are relative to the config file's folder",
    "CFG-4": "rename one, or drop one from [machines] files",
    "CFG-5": "rename one; ids must differ by more than case",
    "CFG-6": "rename it to keep both machines",
    "CFG-7": "fix the project config",
    "CFG-9": 'give text = "…" or file = "PATH"',
    "CFG-10": "give one of dir, url or url-env; namespace goes with url or url-env",
    "CFG-11": "use a harness and a part that the message lists",
    "CFG-12": "remove the second entry",
    "FMT-1": "fix the YAML at this line",
    "FMT-2": "keep one of them",
    "FMT-3": "add meta: { smllm: 1 }",
    "FMT-4": "keys are camelCase; smllm's own data goes under meta",
    "FMT-5": "smllm info schema prints every key and its type",
    "FMT-6": "use a flat machine; meta.sharedActions replaces repeated entry/exit actions",
    "FMT-7": "use letters, digits, _ and -",
    "MCH-3": "add an unguarded last candidate, e.g. { target: STATE, reenter: true }",
    "MCH-4": "break the loop; a state with always is never rested in",
    "MCH-7": "keep one non-final fallback state",
    "MCH-8": "move it to the transition of the event that carries the ref",
    "MCH-9": "command takes run, timeoutSecs, cwd; visits takes state, atLeast",
    "MCH-10": "prompt takes text or file; command takes run, timeoutSecs, cwd; "
    "setRef takes nothing",
    "MCH-11": "paths are relative to the machine file's folder",
    "MCH-12": "each entry needs states, and entry or exit",
    "MCH-13": "add a transition to it, mark it meta.entryPoint, or remove it",
    "MCH-14": "move the events to the state always leads to",
    "MCH-15": "move them to the entry of the final state",
    "MCH-16": "remove reenter",
    "MCH-17": "remove meta.entryPoint",
    "MCH-18": "add a state with type: final if the work can end",
    "MCH-19": "cwd is relative to the machine file's folder",
    "EVT-1": "params takes type: object, properties, required, $defs; each property is a JSON "
    "Schema 2020-12",
    "EVT-2": "patterns are ECMA-262 regexes; write [0-9] for digits",
    "EVT-3": "declare it under properties",
    "EVT-4": "rename one",
    "EVT-5": "rename the event; built-ins are always offered",
    "EVT-6": "these are enter's own params; pick another name",
    "EVT-7": "rename it, or add setRef to the transition",
    "EVT-8": "drop its declaration; setRef implies it",
    "EVT-9": "paramDescriptions only rewords existing params",
    "EVT-10": "use it in a state's on, or remove it",
    "EVT-12": "give one event source: agent if agents should start it",
    "EVT-13": "unroll the nesting to a fixed depth if the agent should read it without $defs",
    "AGT-1": 'reword it, e.g. write the tag in backticks with a space: "< /smllm>"',
    "AGT-2": "remove KEY; smllm fixes the params and source of built-ins",
    "AGT-3": "add a description, so the agent knows when to fire it",
    "AGT-4": "remove it (resume's rewording applies in the fallback state)",
    "AGT-5": "add a prompt action or enter-STATE.md",
    "INS-1": "restore the state, or fire enter for the instance with state: an existing state",
    "INS-2": "leave the fallback state with one of its events, or pause and enter",
    "INS-3": "restore the machine to continue them",
    "INS-6": "refs are set once; only new refs must match",
}

#: The level of each rule whose level isn't "error".
LEVELS: dict[str, str] = {
    "CFG-6": "info",
    "CFG-7": "warning",
    "CFG-8": "warning",
    "CFG-12": "warning",
    "MCH-13": "warning",
    "MCH-14": "warning",
    "MCH-15": "warning",
    "MCH-16": "warning",
    "MCH-17": "warning",
    "MCH-18": "info",
    "MCH-19": "warning",
    "EVT-7": "warning",
    "EVT-10": "warning",
    "EVT-12": "info",
    "EVT-13": "info",
    "AGT-1": "warning",
    "AGT-3": "warning",
    "AGT-4": "warning",
    "AGT-5": "info",
    "INS-1": "warning",
    "INS-2": "warning",
    "INS-3": "info",
    "INS-4": "warning",
    "INS-5": "warning",
    "INS-6": "info",
}


def format_path(path: Path_) -> str:
    """`("states", "PLAN", "on", "planned", 0)` → `states.PLAN.on.planned[0]`."""
    out: list[str] = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        else:
            out.append(("." if out else "") + part)
    return "".join(out)


#: line breaks and other control characters: a finding is one line, whatever a name holds
_CONTROLS = "[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]"


def one_line(text: str) -> str:
    """`text` with its control characters written as escapes (`\\n`, `\\x00`, `\\u2028`)."""
    if text.isprintable():  # the usual case, without importing `re` on the hook path
        return text
    import re

    return re.sub(_CONTROLS, lambda m: ascii(m.group())[1:-1], text)


class Finding(Record):
    """One finding of a check, at `file:line:col` of the node that is wrong."""

    rule: str
    level: str
    file: str
    line: int | None
    col: int | None
    path: str | None
    message: str
    hint: str | None

    @classmethod
    def make(
        cls,
        rule: str,
        file: str,
        message: str,
        *,
        path: Path_ | None = None,
        line: int | None = None,
        col: int | None = None,
        hint: str | None = None,
    ) -> Finding:
        hint = hint if hint is not None else HINTS.get(rule)
        return cls(
            rule,
            LEVELS.get(rule, "error"),
            one_line(file),
            line,
            col,
            one_line(format_path(path)) if path else None,
            one_line(message),
            one_line(hint) if hint is not None else None,
        )

    def in_file_order(self) -> tuple[int, int, str, str]:
        """validation.md §3's order within one file: line, column, rule id, message."""
        return (self.line or 0, self.col or 0, self.rule, self.message)

    def location(self) -> str:
        """`FILE:LINE:COL` as the loader's error lines and `validate` print it."""
        if self.line is None:
            return self.file
        if self.col is None:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.col}"

    def text(self) -> str:
        """`FILE:LINE:COL: LEVEL: PATH: MESSAGE (RULE)` (validation.md §3)."""
        where = f"{self.path}: " if self.path else ""
        return f"{self.location()}: {self.level}: {where}{self.message} ({self.rule})"
