"""`smllm harness install NAME …` and `smllm harness status [NAME] …` (cli-and-harnesses.md §6):
from the parsed arguments to a plan (plan.py), then, for install, Claude's `claude mcp` runs,
the file writes and the config's declined parts, and the report.

Exit codes: 0 done (status: always); 1 install refused (a part edited by hand without
`--force`, a file that doesn't parse, `claude` missing or failing), with nothing written, or a
file that couldn't be written; 2 bad usage (an unknown harness or part, `agents --scope user`,
no smllm executable found), raised as SmllmError for the CLI to print.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from ...engine.records import minute
from ...errors import SmllmError
from ...files import emit_json
from ...machine.configs.config import shown_path
from .declined import config_path, declined, with_declined
from .external import ClaudeFailed, run_claude, user_mcp_state
from .jsonfile import Broken
from .notes import notes_for, this_smllm
from .parts import HARNESSES, Part, Where, parts_of, tool_timeout
from .plan import Plan, Row, make_plan
from .writing import read_text, remove_file, write_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from argparse import Namespace

__all__ = ["install_or_status", "project_root", "smllm_executable"]

_NAMES = ", ".join(HARNESSES)


def project_root(cwd: str) -> str:
    """The folder holding the nearest `.smllm/` at or above `cwd`, else `cwd`."""
    here = os.path.abspath(cwd)
    while True:
        if os.path.isdir(os.path.join(here, ".smllm")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return os.path.abspath(cwd)
        here = parent


def smllm_executable() -> str:
    """The absolute path of this smllm's console script (for user-scope files); SmllmError
    when there is none."""
    found = this_smllm()
    if found is None:
        folder = os.path.dirname(os.path.abspath(sys.executable))
        raise SmllmError(
            f"can't find the smllm executable (not in {folder}, not on PATH); install smllm "
            "with pip or pipx, then run this again"
        )
    return found


def _where(scope: str) -> Where:
    """A project's files run `smllm` from the client's PATH (the same bytes on every
    teammate's machine); the user's run this smllm by its absolute path."""
    cwd = os.getcwd()
    root = project_root(cwd)
    smllm = "smllm" if scope == "project" else smllm_executable()
    limit = tool_timeout(_longest_command(scope, root))
    return Where(scope, root, os.path.expanduser("~"), smllm, os.environ, limit)


def _longest_command(scope: str, root: str) -> float:
    """The longest timeout of a guard or action command of the machines the scope's configs
    list (the project's and the user's, or the user's alone): 60 s, the default, when none."""
    from ...machine.configs.cache import load_cached
    from ...machine.configs.config import find_configs, user_config_path
    from ...machine.model import DEFAULT_TIMEOUT_SECS, Command

    if scope == "project":
        configs = find_configs(root, None)
    else:
        user = user_config_path()
        configs = (os.path.realpath(user),) if os.path.isfile(user) else ()
    if not configs:
        return DEFAULT_TIMEOUT_SECS
    try:
        machines = load_cached(configs).machines.values()
    except Exception:  # a store or cache that can't be read: the default limit still holds
        return DEFAULT_TIMEOUT_SECS
    longest: float = DEFAULT_TIMEOUT_SECS
    stack: list[object] = list(machines)
    while stack:  # a machine is records (tuples) and dicts all the way down
        item = stack.pop()
        if isinstance(item, Command):
            longest = max(longest, item.timeout)
        elif isinstance(item, tuple | list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return longest


def _check_name(name: str | None, scope: str) -> None:
    if name is not None and name not in HARNESSES:
        raise SmllmError(f"no harness named {name} ({_NAMES})")
    if name == "agents" and scope == "user":
        raise SmllmError("agents has no user scope: its instructions go in the project's AGENTS.md")


def _shown(path: str) -> str:
    """Relative to the current folder when inside it, else `~/…` under the home folder, else
    absolute."""
    shown = shown_path(path)
    home = os.path.expanduser("~")
    if os.path.isabs(shown) and home not in ("", "/") and shown.startswith(home + os.sep):
        return "~" + shown[len(home) :]
    return shown


def _report(name: str, scope: str, rows: list[Row], notes: list[str]) -> dict[str, Any]:
    parts = []
    for row in rows:
        item: dict[str, Any] = {"part": row.part, "path": row.path, "state": row.state}
        if row.action is not None:
            item["action"] = row.action
        parts.append(item)
    return {"harness": name, "scope": scope, "parts": parts, "notes": notes}


def _print(
    report: dict[str, Any], as_json: bool, indent: str = "", errors: Sequence[str] = ()
) -> None:
    """The report: one JSON object, or `PART: ACTION (PATH)` lines on stdout; then any errors
    and the notes (advice) on stderr, which in JSON are in the object too."""
    if as_json:
        emit_json(report)
    else:
        for part in report["parts"]:
            what = part.get("action", part["state"])
            sys.stdout.write(f"{indent}{part['part']}: {what} ({_shown(part['path'])})\n")
        if "lastRan" in report:
            ran = ", ".join(
                f"{hook} {minute(at) if at else 'never'}" for hook, at in report["lastRan"].items()
            )
            sys.stdout.write(f"{indent}hooks last ran: {ran}\n")
        sys.stdout.flush()
    for error in errors:
        sys.stderr.write(f"error: {error}\n")
    if not as_json or errors:
        for note in report["notes"]:
            sys.stderr.write(f"note: {note}\n")


def install_or_status(args: Namespace) -> int:
    scope = args.scope
    _check_name(args.name, scope)
    if args.action == "status":
        return _status(args.name, scope, bool(args.json))
    if args.action == "uninstall":
        return _uninstall(args)
    return _install(args)


# -- status ------------------------------------------------------------------------------


def _declined_here(where: Where, name: str) -> tuple[set[str], list[str]]:
    """The parts the scope's config declines, and a note when it can't be read."""
    path = config_path(where.scope, where.root)
    try:
        return set(declined(read_text(path), name)), []
    except Broken as exc:
        return set(), [f"{_shown(path)} doesn't parse ({exc}); no part counts as declined"]


def _status_of(name: str, where: Where) -> dict[str, Any]:
    gone, notes = _declined_here(where, name)
    plan = make_plan(parts_of(where, name), gone, False, install=False)
    notes += [f"{_shown(path)} doesn't parse: {why}" for path, why in plan.broken]
    report = _report(name, where.scope, plan.rows, notes + notes_for(name, where, plan.rows))
    hook_part = "plugin" if name == "opencode" else "hooks"
    if any(row.part == hook_part and row.state not in ("missing", "declined") for row in plan.rows):
        from ...store.user import user_store
        from ..seen import last_ran

        user = user_store()
        try:
            report["lastRan"] = last_ran(
                user, name, where.root if where.scope == "project" else None
            )
        finally:
            user.close()
    return report


def _status(name: str | None, scope: str, as_json: bool) -> int:
    where = _where(scope)
    if name is not None:
        _print(_status_of(name, where), as_json)
        return 0
    found = []
    shared = _shared_parts(where)
    for harness in HARNESSES:
        if harness == "agents" and scope == "user":
            continue
        if _installed(harness, _rows(harness, where), shared):
            found.append(_status_of(harness, where))
    if as_json:
        emit_json({"scope": scope, "harnesses": found})
        return 0
    if not found:
        sys.stdout.write(f"no harness has smllm's parts in {scope} scope\n")
    for i, report in enumerate(found):
        sys.stdout.write(("\n" if i else "") + f"{report['harness']}:\n")
        _print(report, False, indent="  ")
    return 0


def _shared_parts(where: Where) -> dict[tuple[str, str], set[str]]:
    """(part, file) → the harnesses that have that part in that file: the instructions region
    (AGENTS.md) and `.mcp.json`'s server are shared."""
    owners: dict[tuple[str, str], set[str]] = {}
    for harness in HARNESSES:
        if harness == "agents" and where.scope == "user":
            continue
        for part in parts_of(where, harness):
            owners.setdefault((part.name, part.path), set()).add(harness)
    return owners


def _installed(harness: str, rows: list[Row], shared: dict[tuple[str, str], set[str]]) -> bool:
    """Whether `harness` is installed: a part of its own (not one it shares with another
    client) is there or declined; `agents`, whose one part is the shared region, when that is
    there."""
    there = [row for row in rows if row.state != "missing"]  # declined: the user chose it
    if harness == "agents":
        return bool(there)
    return any(len(shared.get((row.part, row.path), ())) <= 1 for row in there)


def _rows(name: str, where: Where) -> list[Row]:
    """Each part's state, as status reads them, without its notes or the hooks' last runs."""
    gone, _ = _declined_here(where, name)
    return make_plan(parts_of(where, name), gone, False, install=False).rows


# -- uninstall ---------------------------------------------------------------------------


def _uninstall(args: Namespace) -> int:
    """smllm's entries of every part of NAME removed, the user's kept; a part another
    installed client shares stays. The config's declined parts are left as they are."""
    name: str = args.name
    where = _where(args.scope)
    parts = parts_of(where, name)
    shared = _shared_parts(where)
    users: dict[tuple[str, str], list[str]] = {}
    for other in HARNESSES:
        # `agents` is the region alone: it keeps nothing of another client's
        if other in (name, "agents"):
            continue
        if _installed(other, _rows(other, where), shared):
            for part in parts_of(where, other):
                users.setdefault((part.name, part.path), []).append(other)
    kept = {p.name: users[(p.name, p.path)] for p in parts if (p.name, p.path) in users}
    plan = make_plan(parts, {p.name for p in parts if p.name not in kept}, False, install=True)
    if plan.broken:
        errors = [
            f"can't read {_shown(path)}: {why}; nothing was written" for path, why in plan.broken
        ]
        return _refuse(name, where, plan, errors, bool(args.json), False)

    def action(row: Row) -> str:
        if row.part in kept:
            return f"kept (used by {', '.join(kept[row.part])})"
        return "removed" if row.action == "removed" else "missing"

    rows = [row._replace(action=action(row)) for row in plan.rows]
    plan = plan._replace(rows=rows)
    return _write(name, where, plan, parts, dict(plan.writes), bool(args.json), notes=False)


# -- install -----------------------------------------------------------------------------


def _parts_named(name: str, given: list[str], flag: str) -> list[str]:
    for part in given:
        if part not in HARNESSES[name]:
            raise SmllmError(
                f"{name} has no part {part} (parts: {', '.join(HARNESSES[name])}); check {flag}"
            )
    return list(dict.fromkeys(given))


def _refuse(
    name: str, where: Where, plan: Plan, errors: list[str], as_json: bool, edited: bool
) -> int:
    rows = [
        row._replace(action="left alone") if row.action in ("written", "removed") else row
        for row in plan.rows
    ]
    report = _report(name, where.scope, rows, [])
    if edited:
        force = f"smllm harness install {name}" + (" --scope user" if where.scope == "user" else "")
        report["notes"].append(
            f"parts marked edited were changed by hand; {force} --force overwrites them"
        )
    _print(report, as_json, errors=errors)
    return 1


def _cant_write(exc: OSError, fallback: str) -> SmllmError:
    """`error: can't write PATH: REASON`, exit 1 (the CLI prints it, and for --json its one
    object)."""
    failed = SmllmError(f"can't write {_shown(str(exc.filename or fallback))}: {exc.strerror}")
    failed.exit_code = 1
    return failed


def _install(args: Namespace) -> int:
    name: str = args.name
    as_json = bool(args.json)
    without = _parts_named(name, args.without, "--without")
    with_ = _parts_named(name, args.with_, "--with")
    both = [part for part in without if part in with_]
    if both:
        raise SmllmError(f"{both[0]} is given to both --with and --without")
    where = _where(args.scope)
    config = config_path(where.scope, where.root)
    parts: list[Part] = parts_of(where, name)
    try:
        config_text = read_text(config)
        old_gone = declined(config_text, name)
    except Broken as exc:
        plan = make_plan(parts, set(), args.force, install=True)
        error = f"can't read {_shown(config)}: {exc}; nothing was written"
        return _refuse(name, where, plan, [error], as_json, False)
    gone = [p for p in old_gone if p not in with_] + [p for p in without if p not in old_gone]
    plan = make_plan(parts, set(gone), args.force, install=True)
    errors = [f"can't read {_shown(path)}: {why}; nothing was written" for path, why in plan.broken]
    errors += [
        f"{_shown(row.path)}: smllm's {row.part} part was changed by hand; nothing was written"
        for row in plan.edited
    ]
    if errors:
        return _refuse(name, where, plan, errors, as_json, bool(plan.edited))
    writes = dict(plan.writes)
    new_config = with_declined(config_text, name, gone)
    if new_config != (config_text or ""):
        writes[config] = (new_config, "")
    return _write(name, where, plan, parts, writes, as_json)


def _write(
    name: str,
    where: Where,
    plan: Plan,
    parts: list[Part],
    writes: dict[str, tuple[str | None, str]],
    as_json: bool,
    notes: bool = True,
) -> int:
    """Apply a plan: Claude's `claude mcp` first, then the files; then the report. A plan that
    changes nothing says so in one line."""
    config = config_path(where.scope, where.root)
    try:  # folders first: one that can't be made stops the install before anything is written
        for path, (text, _) in writes.items():
            if text is not None:
                os.makedirs(os.path.dirname(os.path.realpath(path)), exist_ok=True)
    except OSError as exc:
        raise _cant_write(exc, config) from None
    if plan.external is not None:
        state, want = plan.external
        part = next(p for p in parts if p.kind == "external")
        try:
            run_claude(state, want)
            after = user_mcp_state(part.path, part.want)
        except (ClaudeFailed, Broken) as exc:
            return _refuse(name, where, plan, [f"{exc}; nothing was written"], as_json, False)
        if after != ("missing" if want is None else "current"):
            error = f"claude mcp ran, but {_shown(part.path)} doesn't show it; nothing was written"
            return _refuse(name, where, plan, [error], as_json, False)
    stop = where.root if where.scope == "project" else where.home
    try:
        for path, (text, empty) in writes.items():
            if text is None:
                remove_file(path, empty, stop)
            else:
                write_text(path, text)
    except OSError as exc:
        raise _cant_write(exc, config) from None
    said = notes_for(name, where, plan.rows) if notes else []
    report = _report(name, where.scope, plan.rows, said)
    if as_json or writes or plan.external is not None:
        _print(report, as_json)
    else:  # a second install: nothing changed, said in one line
        what = "uninstalled" if not notes else "installed"
        sys.stdout.write(f"{name}: nothing to do; smllm is {what} as it should be\n")
        for note in said:
            sys.stderr.write(f"note: {note}\n")
    return 0
