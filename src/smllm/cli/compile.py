"""`smllm compile FILE [-o OUT]`: the machine's normal form (machine-format.md §5).

The same checks as `validate` on the one file; findings go to stderr, and any error means
nothing is written. The output is replaced atomically, so a reader never sees half of it.
"""

from __future__ import annotations

import os
import sys

from ..machine.configs.config import shown_path
from .common import Exit, write_atomically
from .validate import finding_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from argparse import Namespace

__all__ = ["compile_machine"]


def compile_machine(args: Namespace) -> int:
    from ..machine.loader.load import load_machine_file
    from ..machine.normal import NormalFormError, dump_normal, normal_form

    path = os.path.abspath(args.file)
    if os.path.isdir(path):
        raise Exit(2, f"{args.file} is a folder, not a machine file")
    if not os.path.isfile(path):
        raise Exit(2, f"no file {args.file}")
    result = load_machine_file(path, shown_path(path))
    findings = sorted(result.findings, key=lambda f: f.in_file_order())
    lines = finding_lines(findings, info=False)
    if lines:
        sys.stderr.write("\n".join(lines) + "\n")
    if result.machine is None or result.data is None:
        return 1
    out = os.path.abspath(args.output) if args.output else None
    try:
        form = normal_form(result.data, path, os.path.dirname(out) if out else os.getcwd())
        data = dump_normal(form)
    except NormalFormError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    if out is None:
        sys.stdout.buffer.write(data)
        return 0
    write_atomically(out, data)
    return 0
