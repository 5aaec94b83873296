"""Reading a machine file's guards and actions (machine-format.md §2.7, §2.8) into the model,
with MCH-9 and MCH-10 at the exact node; and the one rule of prompt text, which the engine
also applies when it reads a prompt file on the hook path (so this module stays light)."""

from __future__ import annotations

import os

from ..model import DEFAULT_TIMEOUT_SECS, MAX_TIMEOUT_SECS, Action, Command, Guard

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ..findings import Path_

__all__ = ["ActionReader", "normalise_prompt"]


def normalise_prompt(text: str) -> str:
    """machine-format.md §2.9: CRLF becomes LF and trailing line breaks are dropped."""
    return text.replace("\r\n", "\n").rstrip("\n")


class ActionReader:
    """The guard and action part of the loader's builder (load.py's `_Builder`)."""

    dir: str  # the machine file's folder
    state_names: list[str]
    prompts: list[tuple[Path_, Action]]  # for the file checks of deep.py
    cwds: list[tuple[Path_, str]]

    def add(
        self, rule: str, path: Path_, message: str, *, at_key: bool = False, hint: str | None = None
    ) -> None:
        raise NotImplementedError

    def read_command(self, params: dict[str, Any], path: Path_, rule: str) -> Command | None:
        ok = True
        for key in params:
            if key not in ("run", "timeoutSecs", "cwd"):
                self.add(
                    rule,
                    (*path, key),
                    f"command has no param {key} (params: run, timeoutSecs, cwd)",
                    at_key=True,
                )
                ok = False
        run = params.get("run")
        if isinstance(run, list) and run and all(isinstance(r, str) for r in run):
            run_v: str | tuple[str, ...] = tuple(run)
        elif isinstance(run, str) and run.strip():
            run_v = run
        else:
            self.add(
                rule,
                (*path, "run") if run is not None else path,
                "command needs run: a non-empty string or a non-empty list of strings",
            )
            return None
        timeout = params.get("timeoutSecs", DEFAULT_TIMEOUT_SECS)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            self.add(rule, (*path, "timeoutSecs"), "timeoutSecs must be a number greater than 0")
            return None
        if timeout > MAX_TIMEOUT_SECS:  # a 400-digit integer has no float; a year is plenty
            self.add(
                rule, (*path, "timeoutSecs"), f"timeoutSecs must be at most {MAX_TIMEOUT_SECS}"
            )
            return None
        cwd = params.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            self.add(rule, (*path, "cwd"), "cwd must be a string")
            return None
        text = str(timeout)
        if cwd and ok:
            self.cwds.append(((*path, "cwd"), os.path.normpath(os.path.join(self.dir, cwd))))
        return (
            Command(
                run_v,
                float(timeout),
                text,
                os.path.normpath(os.path.join(self.dir, cwd)) if cwd else None,
            )
            if ok
            else None
        )

    def read_guard(self, data: dict[str, Any], path: Path_) -> Guard | None:
        kind = data.get("type")
        params = data.get("params") or {}
        ppath = (*path, "params")
        if kind == "command":
            cmd = self.read_command(params, ppath, "MCH-9")
            return Guard("command", command=cmd) if cmd else None
        if kind == "visits":
            for key in params:
                if key not in ("state", "atLeast"):
                    self.add(
                        "MCH-9",
                        (*ppath, key),
                        f"visits has no param {key} (params: state, atLeast)",
                        at_key=True,
                    )
            state = params.get("state")
            at_least = params.get("atLeast")
            if state not in self.state_names:
                self.add(
                    "MCH-9",
                    (*ppath, "state") if state is not None else ppath,
                    f"visits needs state: an existing state (got {state})",
                )
            if isinstance(at_least, bool) or not isinstance(at_least, int) or at_least < 1:
                self.add(
                    "MCH-9",
                    (*ppath, "atLeast") if at_least is not None else ppath,
                    "visits needs atLeast: an integer ≥ 1",
                )
                return None
            return Guard("visits", state=str(state), at_least=at_least)
        self.add(
            "MCH-9", (*path, "type"), f"guard type {kind} doesn't exist (types: command, visits)"
        )
        return None

    def read_actions(self, data: Any, path: Path_, allow_ref: bool) -> tuple[Action, ...]:
        if data is None:
            return ()
        items = data if isinstance(data, list) else [data]
        out = []
        for index, item in enumerate(items):
            ipath = (*path, index) if isinstance(data, list) else path
            if item == "setRef":
                item = {"type": "setRef"}
            kind = item.get("type")
            params = item.get("params")
            if kind == "setRef":
                if not allow_ref:
                    self.add("MCH-8", ipath, "setRef only works in the actions of an on transition")
                if params is not None:
                    self.add("MCH-10", (*ipath, "params"), "setRef takes no params")
                out.append(Action("setRef"))
            elif kind == "prompt":
                action = self.read_prompt(params or {}, (*ipath, "params"))
                if action:
                    out.append(action)
            elif kind == "command":
                cmd = self.read_command(params or {}, (*ipath, "params"), "MCH-10")
                if cmd:
                    out.append(Action("command", command=cmd))
            else:
                self.add(
                    "MCH-10",
                    (*ipath, "type"),
                    f"action type {kind} doesn't exist (types: prompt, command, setRef)",
                )
        return tuple(out)

    def read_prompt(self, params: dict[str, Any], path: Path_) -> Action | None:
        text, file = params.get("text"), params.get("file")
        for key in params:
            if key not in ("text", "file"):
                self.add(
                    "MCH-10",
                    (*path, key),
                    f"prompt has no param {key} (params: text, file)",
                    at_key=True,
                )
        if (text is None) == (file is None):
            self.add("MCH-10", path, "a prompt needs exactly one of text or file")
            return None
        if text is not None:
            if not isinstance(text, str):
                self.add("MCH-10", (*path, "text"), "text must be a string")
                return None
            action = Action("prompt", text=normalise_prompt(text))
            self.prompts.append(((*path, "text"), action))
            return action
        if not isinstance(file, str) or not file:
            self.add("MCH-10", (*path, "file"), "file must be a path")
            return None
        action = Action(
            "prompt", file=os.path.normpath(os.path.join(self.dir, file)), file_shown=file
        )
        self.prompts.append(((*path, "file"), action))
        return action
