"""`smllm validate [PATH…] [--info] [--warnings] [--json]` (validation.md §3).

`--warnings` makes warnings fail the run too (exit 1), for CI jobs that keep machines clean.
"""

from __future__ import annotations

import os
import sys

from ..machine.config import shown_path
from ..machine.findings import Finding
from .main import Exit, config_option, emit_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from argparse import Namespace

__all__ = ["counts_line", "finding_lines", "validate"]

_NO_CONFIG = "no config found; run smllm init, or pass --config"


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


def _idle_findings(configs: tuple[str, ...]) -> list[Finding]:
    """validate only: each config's `[idle] on-enter` file must be readable (CFG-9), and its
    text must not close smllm's block (AGT-1). At run time a missing file is `Prompt failed`."""
    from ..machine.config import place_in_config, read_config
    from ..machine.deep import closing_tag

    out: list[Finding] = []
    for path in configs:
        if not os.path.isfile(path):
            continue
        cfg = read_config(path, "")
        idle = cfg.idle
        if idle is None or not cfg.ok:
            continue
        key = ("idle", "on-enter", "text" if idle.file is None else "file")
        found: list[tuple[str, str]] = []  # (rule, message)
        text = idle.text
        if idle.file is not None:
            try:
                with open(idle.file, "rb") as f:
                    text = f.read().decode("utf-8")
            except FileNotFoundError:
                found.append(("CFG-9", f"no prompt file {idle.shown}"))
            except (OSError, UnicodeDecodeError) as exc:
                reason = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else exc.strerror
                found.append(("CFG-9", f"prompt file {idle.shown}: {reason}"))
        tag = closing_tag(text or "")
        if tag is not None:
            message = f"prompt text contains {tag}, which would close smllm's block"
            found.append(("AGT-1", message))
        out += place_in_config(path, [Finding.make(r, path, m, path=key) for r, m in found])
    return out


def _collect(args: Namespace) -> tuple[list[str], list[Finding]]:
    """(files in load order, their findings) of the PATHs, or of the configs found."""
    from ..machine.cache import load_cached
    from ..machine.config import find_configs

    configs: list[str] = []
    machines: list[str] = []
    for path in args.paths:
        if not os.path.exists(path):
            raise Exit(2, f"no file {path}")
        (configs if path.endswith(".toml") else machines).append(os.path.abspath(path))
    if not args.paths:
        found = find_configs(os.getcwd(), config_option(args))
        if not found:
            raise Exit(2, _NO_CONFIG)
        configs = list(found)
    files: list[str] = []
    findings: list[Finding] = []
    if configs:
        # the compiled cache serves an unchanged config: nothing is parsed again
        loaded = load_cached(tuple(configs))
        files += [f for f in loaded.files if os.path.isfile(f)]
        findings += loaded.findings
        findings += _idle_findings(loaded.configs)
        from ..api.saved import check_saved

        findings += check_saved(loaded)
    from ..machine.load import load_machine_file

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
    findings.sort(
        key=lambda f: (order.get(f.file, len(order)), f.line or 0, f.col or 0, f.rule, f.message)
    )
    shown = [_shown(f, files) for f in findings]
    count = {level: sum(f.level == level for f in shown) for level in ("error", "warning", "info")}
    if args.json:
        emit_json(
            {
                "ok": count["error"] == 0,
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
    failed = count["error"] or (args.warnings and count["warning"])
    return 1 if failed else 0
