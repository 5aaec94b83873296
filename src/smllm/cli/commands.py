"""The CLI's commands (cli-and-harnesses.md §2). Each returns its exit code."""

from __future__ import annotations

import os
import sys

from ..api.app import App, Result
from ..errors import CallError, NoConfig
from .common import (
    Exit,
    config_option,
    emit_json,
    make_folder,
    read_toml_for_edit,
    report_load_errors,
    write_atomically,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from argparse import Namespace


__all__ = ["demo", "fire", "info", "init", "instance", "new", "session"]

CONFIG_TEMPLATE = """\
# smllm config: which state machines guide the agents in this project.
[machines]
# `smllm new ID --write` writes a machine file and adds it here.
files = []
"""


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _shown(path: str) -> str:
    from ..machine.configs.config import shown_path

    return shown_path(path)


def _app(args: Namespace) -> App:
    return App(config=config_option(args))


def _reply(result: Result, as_json: bool) -> int:
    report_load_errors(result.loaded)
    if as_json:
        emit_json(result.to_json())
    else:
        _out(result.text())
    return 0 if result.ok else 1


def _call_error(exc: CallError, as_json: bool) -> int:
    if as_json:
        emit_json({"ok": False, "session": None, "location": None, "text": f"error: {exc}"})
    sys.stderr.write(f"error: {exc}\n")
    return 1


# -- init and new ------------------------------------------------------------------------------


def init(args: Namespace) -> int:
    from ..machine.configs.config import user_config_path

    path = user_config_path() if args.user else os.path.join(os.getcwd(), ".smllm", "config.toml")
    created = not os.path.exists(path)
    if created:
        make_folder(os.path.dirname(path))
        _atomic_write(path, CONFIG_TEMPLATE)
    if args.json:
        emit_json({"path": path, "created": created})
    else:
        _out(f"created {_shown(path)}" if created else f"{_shown(path)} exists; left as it was")
    return 0


def _atomic_write(path: str, text: str) -> None:
    write_atomically(path, text.encode("utf-8"))


#: the schema file `new --write` keeps beside the config, for editors (`info schema` writes it)
SCHEMA_FILE = "smllm.schema.json"


def machine_template(machine_id: str, schema: str = SCHEMA_FILE) -> str:
    return f"""\
# yaml-language-server: $schema={schema}
id: {machine_id}
description: What this machine guides, in one line.
initial: START
meta:
  smllm: 1
  events:
    done:
      description: Fire when the work is done.
states:
  START:
    meta: {{ entryPoint: true }}
    entry: {{ type: prompt, params: {{ text: "Do the work, then fire done." }} }}
    on:
      done: DONE
  DONE:
    type: final
    entry: {{ type: prompt, params: {{ text: "Summarise what you did." }} }}
"""


def new(args: Namespace) -> int:
    from ..machine.loader.schema import NAME_PATTERNS
    from ..machine.regex import pattern_matches

    if not pattern_matches(NAME_PATTERNS["machine"], args.id):
        raise Exit(2, f"machine name {args.id} must match {NAME_PATTERNS['machine']}")
    if not args.write:
        text = machine_template(args.id)
        if args.json:
            emit_json({"path": None, "written": False, "config": None, "text": text})
        else:
            sys.stdout.write(text)
        return 0
    explicit = config_option(args)
    if explicit:
        config = os.path.abspath(explicit)
    else:
        from ..machine.configs.config import find_configs, user_config_path

        found = [
            c for c in find_configs(os.getcwd(), None) if c != os.path.realpath(user_config_path())
        ]
        if not found:
            raise NoConfig()
        config = found[-1]
    folder = os.path.abspath(args.dir) if args.dir else os.path.dirname(config)
    path = os.path.join(folder, f"{args.id}.smllm.yaml")
    if os.path.exists(path):
        raise Exit(1, f"{_shown(path)} exists")
    _refuse_a_taken_id(args.id, explicit)
    entry = os.path.relpath(path, os.path.dirname(config))
    updated = _add_machine_file(config, entry)
    schema = os.path.join(os.path.dirname(config), SCHEMA_FILE)
    text = machine_template(args.id, os.path.relpath(schema, folder))
    make_folder(folder)
    _atomic_write(path, text)
    _atomic_write(config, updated)
    schema_written = not os.path.exists(schema)
    if schema_written:
        _atomic_write(schema, _schema_text())
    if args.json:
        emit_json(
            {
                "path": path,
                "written": True,
                "config": config,
                "schema": schema if schema_written else None,
            }
        )
    else:
        _out(f"wrote {_shown(path)}; added it to {_shown(config)}")
        if schema_written:
            _out(f"wrote {_shown(schema)}, the machine schema that editors read")
    return 0


def _refuse_a_taken_id(machine_id: str, explicit: str | None) -> None:
    """Exit 1 when a machine configured here already has the id, even in another case (CFG-4,
    CFG-5): a second one would withdraw both."""
    from ..machine.configs.cache import load_cached
    from ..machine.configs.config import find_configs

    configs = find_configs(os.getcwd(), explicit)
    for taken, machine in load_cached(configs).machines.items():
        if taken.casefold() == machine_id.casefold():
            raise Exit(
                1, f"a machine with id {taken} is already configured ({_shown(machine.file)})"
            )


def _add_machine_file(config: str, entry: str) -> str:
    """The config's text with `entry` appended to `[machines] files`, formatting kept."""
    import tomlkit

    doc, bom = read_toml_for_edit(config)
    machines = doc.get("machines")
    if machines is None:
        machines = tomlkit.table()
        doc["machines"] = machines
    files = machines.get("files")
    if files is None:
        files = tomlkit.array()
        machines["files"] = files
    if not isinstance(files, list):
        raise Exit(1, f"{_shown(config)}: machines.files must be a list")
    if entry not in files:
        files.append(entry)
    return bom + tomlkit.dumps(doc)


# -- fire and sessions -------------------------------------------------------------------------


def parse_params(raw: list[str]) -> tuple[tuple[str, Any], ...]:
    out = []
    for item in raw:
        name, sep, value = item.partition("=")
        if not sep:
            raise Exit(2, f"--param needs NAME=VALUE (got {item!r})")
        out.append((name, value))
    return tuple(out)


def parse_json_params(text: str | None) -> tuple[tuple[str, Any], ...]:
    """`--params JSON`: one JSON object, its keys in order, repeated keys kept (a param given
    twice is refused by the engine, not lost here)."""
    if text is None:
        return ()
    from ..jsontext import loads_keeping_repeats, repeat_inside

    if text == "-":
        # bytes, whatever the locale would make of them: a text read is strict in some
        # locales (an error) and surrogateescape in others (text no store can hold)
        try:
            text = sys.stdin.buffer.read().decode("utf-8-sig")
        except UnicodeDecodeError:
            raise CallError(
                "params must be a JSON object: standard input is not UTF-8 text"
            ) from None
    try:
        value, repeated = loads_keeping_repeats(text)
    except ValueError as exc:
        raise CallError(f"params must be a JSON object: {exc}") from None
    except RecursionError:
        raise CallError("params must be a JSON object: it nests too deeply") from None
    if not isinstance(value, dict):
        raise CallError("params must be an object")
    found = repeat_inside(value, repeated)
    if found is not None:
        from ..api.sessions import repeated_key

        raise CallError(repeated_key(*found))
    return tuple(repeated.get(id(value), value.items()))


def fire(args: Namespace) -> int:
    try:
        params = parse_json_params(args.params) + parse_params(args.param)
    except CallError as exc:
        return _call_error(exc, args.json)
    if args.session and (getattr(args, "config", None) or os.environ.get("SMLLM_CONFIG")):
        sys.stderr.write(
            "note: --config is ignored for a call that names a session; it "
            "reloads the configs it was created with\n"
        )
        app = App()
    else:
        app = _app(args)
    try:
        result = app.fire(
            args.session,
            args.event,
            params,
            "host" if args.host else "agent",
            "host" if args.host else "none",
        )
    except CallError as exc:
        return _call_error(exc, args.json)
    return _reply(result, args.json)


def _audit_json(at: str, kind: str, detail: dict[str, Any]) -> dict[str, Any]:
    """One audit record as JSON: `at` and `kind`, then its detail; a detail's own `kind` (the
    instance kind of a `block` or `runaway`) is `instanceKind`, so it can't hide the record's."""
    out: dict[str, Any] = {"at": at, "kind": kind}
    for name, value in detail.items():
        out["instanceKind" if name == "kind" else name] = value
    return out


def session(args: Namespace) -> int:
    if args.action == "new":
        return _session_new(args)
    if args.action == "list":
        return _session_list(args)
    app = App()
    if args.audit:
        from ..api.listing import audit_of

        records = audit_of(app, args.key)
        if args.json:
            emit_json(
                {
                    "session": args.key,
                    "audit": [_audit_json(a.at, a.kind, a.detail) for a in records],
                }
            )
        else:
            from ..text.listing import audit_text

            sys.stdout.write(audit_text(records))
        return 0
    try:
        result = app.view(args.key)
    except CallError as exc:
        return _call_error(exc, args.json)
    report_load_errors(result.loaded)
    if args.json:
        from ..api.listing import session_line

        assert result.session is not None
        line = session_line(app, result.session)
        emit_json({"session": line.to_json(), "text": result.text()})
        return 0
    _out(result.text())
    return 0


def _session_new(args: Namespace) -> int:
    app = _app(args)
    key = app.new_session().key
    result = app.view(key)
    report_load_errors(result.loaded)
    if args.json:
        emit_json({"session": key, "text": result.text()})
    else:
        _out(result.text())
    return 0


def _session_list(args: Namespace) -> int:
    from ..api.listing import session_lines

    lines = session_lines(App())
    problems = sorted({line.problem for line in lines if line.problem is not None})
    if args.json:
        out: dict[str, Any] = {"sessions": [line.to_json() for line in lines]}
        if problems:
            out["errors"] = problems
        emit_json(out)
    else:
        from ..text.listing import session_table

        sys.stdout.write(session_table(lines))
    for problem in problems:
        sys.stderr.write(f"error: {problem}\n")
    return 1 if problems else 0


# -- instances ---------------------------------------------------------------------------------


def instance(args: Namespace) -> int:
    from ..api import listing
    from ..text import listing as text

    app = _app(args)
    if args.action == "list":
        found = listing.instances_here(app, args.machine, args.status)
        if args.json:
            emit_json({"instances": [i.to_json() for i in found]})
        else:
            sys.stdout.write(text.instance_table(found))
        return 0
    detail = listing.instance_detail(app, args.ref, args.machine)
    if args.json:
        emit_json(
            {
                "instance": detail.instance.to_json(),
                "history": [h.to_json() for h in detail.history],
            }
        )
    else:
        sys.stdout.write(text.instance_text(detail))
    return 0


def info(args: Namespace) -> int:
    """`smllm info schema [--write PATH]`: the schema the loader's shape checks read."""

    text = _schema_text()
    if args.write:
        _atomic_write(os.path.abspath(args.write), text)
        _out(f"wrote {_shown(os.path.abspath(args.write))}")
    else:
        sys.stdout.write(text)
    return 0


def _schema_text() -> str:
    import json

    from ..machine.loader.schema import machine_schema

    return json.dumps(machine_schema(), indent=2, ensure_ascii=False) + "\n"


def demo(args: Namespace) -> int:
    from .demo import run_demo

    return run_demo(keep=args.keep)
