"""The normal form of a machine file, written by `smllm compile` (machine-format.md §5).

JSON (hence also YAML 1.2 the loader reads back), with shorthands expanded, defaults filled
in, prompt files and existing `enter-STATE.md` files inlined as `text` prompts, relative `cwd`
rewritten against the output's folder, and keys in the order of machine-format.md §2. It is
built from the file's data once the loader found no error, so every shape here is known good.
The same input gives the same bytes on any machine: no absolute path of the input leaks in.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from .loader.actions import normalise_prompt
from .model import BUILTIN_EVENTS, DEFAULT_TIMEOUT_SECS

__all__ = ["NormalFormError", "dump_normal", "normal_form"]

Data = dict[str, Any]

#: characters JSON leaves raw that YAML 1.2 can't read raw, or reads as a line break
#: (U+0085, U+2028, U+2029 would be folded away inside a quoted scalar)
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


class NormalFormError(Exception):
    """A file the normal form inlines can't be read, or a value has no JSON form."""


def normal_form(data: Data, machine_file: str, out_dir: str) -> Data:
    """The normal form of the validated machine `data` read from `machine_file`."""
    return _Normaliser(os.path.dirname(os.path.abspath(machine_file)), out_dir).machine(data)


def dump_normal(form: Data) -> bytes:
    """Compact JSON, UTF-8, one trailing line break."""
    try:
        text = json.dumps(form, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:  # .inf or .nan inside a params schema
        raise NormalFormError(f"a value has no JSON form: {exc}") from None
    text = _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return (text + "\n").encode("utf-8")


def _listed(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _present(pairs: list[tuple[str, Any]]) -> Data:
    """An object of the pairs whose value isn't None (null counts as absent)."""
    return {k: v for k, v in pairs if v is not None}


class _Normaliser:
    def __init__(self, machine_dir: str, out_dir: str) -> None:
        self.dir = machine_dir
        self.out_dir = os.path.abspath(out_dir)

    def machine(self, data: Data) -> Data:
        meta = data["meta"]
        inst = meta.get("instance") or {}
        ref = inst.get("ref") or {}
        events = meta.get("events") or {}
        shared = meta.get("sharedActions") or []
        out_meta = _present(
            [
                ("smllm", 1),
                (
                    "instance",
                    {
                        "kind": inst.get("kind") or "instance",
                        "ref": _present(
                            [
                                ("param", ref.get("param") or "ref"),
                                ("pattern", ref.get("pattern")),
                                ("description", ref.get("description")),
                            ]
                        ),
                    },
                ),
                ("events", {n: self.event(n, e or {}) for n, e in events.items()} or None),
                ("sharedActions", [self.shared(e) for e in shared] or None),
            ]
        )
        states = {n: self.state(n, s or {}) for n, s in data["states"].items()}
        return _present(
            [
                ("id", data["id"]),
                ("description", data.get("description")),
                ("initial", data["initial"]),
                ("meta", out_meta),
                ("states", states),
            ]
        )

    @staticmethod
    def event(name: str, data: Data) -> Data:
        if name in BUILTIN_EVENTS:  # only a description is allowed (AGT-2)
            return _present([("description", data.get("description"))])
        return _present(
            [
                ("description", data.get("description")),
                ("source", data.get("source") or "agent"),
                ("params", data.get("params")),
            ]
        )

    def shared(self, data: Data) -> Data:
        return _present(
            [
                ("states", list(data["states"])),
                ("position", data.get("position") or "after"),
                ("entry", self.actions(data.get("entry"))),
                ("exit", self.actions(data.get("exit"))),
            ]
        )

    def state(self, name: str, data: Data) -> Data:
        meta = data.get("meta") or {}
        entry = self.actions(data.get("entry")) or []
        if not any(a["type"] == "prompt" for a in entry):
            implied = self.read(os.path.join(self.dir, f"enter-{name}.md"), missing_ok=True)
            if implied is not None:
                entry.append({"type": "prompt", "params": {"text": implied}})
        on = data.get("on")
        always = data.get("always")
        return _present(
            [
                ("description", data.get("description")),
                ("type", data.get("type")),
                (
                    "meta",
                    _present(
                        [
                            ("entryPoint", bool(meta.get("entryPoint"))),
                            ("fallback", bool(meta.get("fallback"))),
                            ("paramDescriptions", meta.get("paramDescriptions") or None),
                        ]
                    ),
                ),
                ("entry", entry or None),
                ("exit", self.actions(data.get("exit"))),
                ("on", None if on is None else {e: self.transitions(t) for e, t in on.items()}),
                ("always", None if always is None else self.transitions(always)),
            ]
        )

    def transitions(self, data: Any) -> list[Data]:
        out = []
        for item in _listed(data):
            if isinstance(item, str):
                item = {"target": item}
            guard = item.get("guard")
            out.append(
                _present(
                    [
                        ("target", item.get("target")),
                        ("guard", None if guard is None else self.guard(guard)),
                        ("actions", self.actions(item.get("actions"))),
                        ("reenter", bool(item.get("reenter"))),
                        ("description", item.get("description")),
                    ]
                )
            )
        return out

    def guard(self, data: Data) -> Data:
        params = data.get("params") or {}
        if data["type"] == "visits":
            return {
                "type": "visits",
                "params": {"state": params["state"], "atLeast": params["atLeast"]},
            }
        return {"type": "command", "params": self.command(params)}

    def actions(self, data: Any) -> list[Data] | None:
        if data is None:
            return None
        out: list[Data] = []
        for item in _listed(data):
            if item == "setRef" or item["type"] == "setRef":
                out.append({"type": "setRef"})
            elif item["type"] == "command":
                out.append({"type": "command", "params": self.command(item.get("params") or {})})
            else:
                params = item.get("params") or {}
                text = params.get("text")
                if text is None:
                    text = self.read(os.path.join(self.dir, params["file"]))
                out.append({"type": "prompt", "params": {"text": normalise_prompt(text or "")}})
        return out

    def command(self, params: Data) -> Data:
        cwd = params.get("cwd")
        if cwd is not None and not os.path.isabs(cwd):
            where = os.path.normpath(os.path.join(self.dir, cwd))
            cwd = os.path.relpath(where, self.out_dir).replace(os.sep, "/")
        return _present(
            [
                ("run", params["run"]),
                ("timeoutSecs", params.get("timeoutSecs", DEFAULT_TIMEOUT_SECS)),
                ("cwd", cwd),
            ]
        )

    @staticmethod
    def read(path: str, missing_ok: bool = False) -> str | None:
        from .checks.deep import read_text

        text, problem = read_text(path)  # bytes decoded: a lone CR stays, as the engine reads it
        if problem == "missing" and missing_ok:
            return None
        if problem == "missing":
            raise NormalFormError(f"no prompt file {path}")
        if problem is not None:
            raise NormalFormError(f"prompt file {path}: {problem}")
        return normalise_prompt(text or "")
