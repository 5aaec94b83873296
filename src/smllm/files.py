"""What every surface shares about its standard output: the one `--json` object
(cli-and-harnesses.md §1). Top-level, so smllm.harness can print its report without importing
smllm.cli; smllm.cli.common re-exports both names."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["emit_json", "json_state"]

#: whether this command wants `--json`, and whether it printed its object (main() prints
#: `{"ok":false,"error":…}` for an exit 1 that printed none: exactly one object, always)
json_state = {"wanted": False, "emitted": False}


def emit_json(obj: Any) -> None:
    from .jsontext import dumps

    sys.stdout.write(dumps(obj) + "\n")
    json_state["emitted"] = True
