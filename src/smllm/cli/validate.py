"""`smllm validate [PATH…] [--info] [--warnings] [--json]` (validation.md §3).

`--warnings` makes warnings fail the run too (exit 1), for CI jobs that keep machines clean.
"""

from __future__ import annotations

import os
import sys

from ..machine.configs.config import shown_path
from ..machine.findings import Finding
from .common import Exit, config_option, emit_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from argparse import Namespace

__all__ = ["counts_line", "finding_lines", "validate"]


def counts_line(errors: int, warnings: int, infos: int) -> str:
    """`E errors, W warnings, I info`, singular for one."""
    e = "error" if errors == 1 else "errors"
    w = "warning" if warnings == 1 else "warnings"
    return f"{errors} {e}, {warnings} {w}, {infos} info"


def finding_lines(findings: list[Finding], info: bool) -> list[str]:
    """Each finding's line and its hint line; info findings only when asked for."""
    out = []
    for f in findings:
        if f.level == "info" and not info:
            continue
        out.append(f.text())
        if f.hint:
            out.append(f"  hint: {f.hint}")
    return out


def _now_findings(configs: tuple[str, ...]) -> list[Finding]:
    """The checks of each config that validate makes each time it runs, never cached: its
    `[idle] on-enter` (CFG-9, AGT-1: they read the prompt file) and its `[state] url-env`
    (CFG-10: the variable is read at each use, so it is checked now, not when the config was
    loaded)."""
    from ..machine.checks.deep import idle_problems
    from ..machine.configs.config import config_finding, read_config

    out: list[Finding] = []
    for path in configs:
        if not os.path.isfile(path):
            continue
        cfg = read_config(path, "")
        # a config with other errors still gets these (validation.md §1: every finding at
        # once); one that isn't TOML at all has neither
        problems: list[tuple[str, str, tuple[str, ...]]] = []
        if cfg.idle is not None:
            at = ("idle", "on-enter", "text" if cfg.idle.file is None else "file")
            problems += [(rule, msg, at) for rule, msg in idle_problems(cfg.idle)]
        if cfg.store.kind == "url-env":
            from ..api.stores import store_url
            from ..errors import StoreError

            try:
                store_url(cfg.store)  # the store's own check, as each command meets it
            except StoreError as exc:
                problems.append(("CFG-10", str(exc), ("state", "url-env")))
        if problems:
            from ..files import read_regular

            data, _problem = read_regular(path)  # for positions only: never a FIFO
            text = (data or b"").decode("utf-8", "replace")
            out += [config_finding(path, text, rule, msg, at) for rule, msg, at in problems]
    return out


def _collect(args: Namespace) -> tuple[list[str], list[Finding]]:
    """(files in load order, their findings) of the PATHs, or of the configs found."""
    from ..machine.configs.cache import load_cached
    from ..machine.configs.config import find_configs

    configs: list[str] = []
    machines: list[str] = []
    for path in args.paths:
        if not os.path.exists(path):
            raise Exit(2, f"no file {path}")
        if os.path.isdir(path):
            raise Exit(2, f"{path} is a folder; give config files (.toml) or machine files")
        (configs if path.endswith(".toml") else machines).append(os.path.abspath(path))
    if not args.paths:
        found = find_configs(os.getcwd(), config_option(args))
        if not found:
            from ..errors import NoConfig

            raise NoConfig()
        configs = list(found)
    files: list[str] = []
    findings: list[Finding] = []
    if configs:
        # the compiled cache serves an unchanged config: nothing is parsed again
        loaded = load_cached(tuple(configs))
        files += [f for f in loaded.files if os.path.isfile(f)]
        findings += loaded.findings
        findings += _now_findings(loaded.configs)
        from ..api.saved_checks import check_saved

        findings += check_saved(loaded, findings)
    from ..machine.loader.load import load_machine_file

    for path in machines:
        files.append(path)
        findings += load_machine_file(path, path).findings
    return files, findings


def _shown(finding: Finding, files: list[str]) -> Finding:
    """The finding with its file, and the files its message and hint name, as shown: the
    compiled cache keeps absolute paths, whatever folder validate runs from."""
    message, hint = finding.message, finding.hint
    for path in files:
        if path in message or (hint and path in hint):
            message = message.replace(path, shown_path(path))
            hint = hint.replace(path, shown_path(path)) if hint else hint
    return finding._replace(file=shown_path(finding.file), message=message, hint=hint)


def validate(args: Namespace) -> int:
    files, findings = _collect(args)
    order = {f: i for i, f in enumerate(files)}
    findings.sort(key=lambda f: (order.get(f.file, len(order)), *f.in_file_order()))
    shown = [_shown(f, files) for f in findings]
    count = {level: sum(f.level == level for f in shown) for level in ("error", "warning", "info")}
    # with --warnings a warning fails the run too; `ok` always agrees with the exit code
    failed = bool(count["error"] or (args.warnings and count["warning"]))
    if args.json:
        emit_json(
            {
                "ok": not failed,
                "files": [shown_path(f) for f in files],
                "findings": [
                    {
                        "rule": f.rule,
                        "level": f.level,
                        "file": f.file,
                        "line": f.line,
                        "column": f.col,
                        "path": f.path,
                        "message": f.message,
                        "hint": f.hint,
                    }
                    for f in shown
                ],
                "counts": count,
            }
        )
    else:
        out = finding_lines(shown, args.info)
        out.append(counts_line(count["error"], count["warning"], count["info"]))
        sys.stdout.write("\n".join(out) + "\n")
    return 1 if failed else 0
