"""What every command shares: leaving with an exit code (`Exit`), the config option, printing
the one `--json` object, and writing a file whole or not at all (cli-and-harnesses.md §1).
"""

from __future__ import annotations

import os
import sys

from ..files import emit_json, json_state, replace_file  # shared with smllm.harness

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from argparse import Namespace
    from typing import Any

    from ..machine.model import Loaded

__all__ = [
    "Exit",
    "config_option",
    "emit_json",
    "fail",
    "json_state",
    "make_folder",
    "report_load_errors",
    "utf8",
    "write_atomically",
]


class Exit(Exception):
    """Leave with `code`, after `error: MESSAGE` on stderr when a message is given."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def config_option(args: Namespace) -> str | None:
    """`--config`, else a non-empty SMLLM_CONFIG; a missing explicit file is exit 2."""
    explicit = getattr(args, "config", None) or os.environ.get("SMLLM_CONFIG") or None
    if explicit and not os.path.isfile(explicit):
        if os.path.exists(explicit):  # a folder, FIFO, socket or device: never opened
            raise Exit(2, f"config file {explicit} is not a regular file")
        raise Exit(2, f"config file {explicit} not found")
    return explicit


def write_atomically(path: str, data: bytes) -> None:
    """Write `path` whole or not at all, through symlinks and keeping its mode
    (`files.replace_file`); a path that can't be written is `error: can't write PATH: REASON`,
    exit 1."""
    try:
        replace_file(path, data)
    except OSError as exc:
        raise Exit(1, f"can't write {path}: {exc.strerror}") from None


def make_folder(path: str) -> None:
    """`mkdir -p path`; one that can't be made is `error: can't create PATH: REASON`, exit 1."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise Exit(1, f"can't create {path}: {exc.strerror}") from None


def utf8(text: str) -> bool:
    """Whether `text` is text: bytes that aren't UTF-8 reach Python as lone surrogates (in
    arguments and, in some locales, standard input), and no store or reply can hold them."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def fail(code: int, message: str | None) -> int:
    """Leave with `code`: `error: MESSAGE` on stderr and, for a `--json` exit 1 that printed
    nothing yet, the one object cli-and-harnesses.md §1 promises (exit 2 prints nothing)."""
    if message:
        sys.stderr.write(f"error: {message}\n")
    if code == 1 and json_state["wanted"] and not json_state["emitted"]:
        emit_json({"ok": False, "error": message})
    return code


def report_load_errors(loaded: Loaded) -> None:
    """Machine files or configs that didn't load: one line saying so (their findings are
    `smllm validate`'s to print, validation.md §1)."""
    files = {f.file for f in loaded.findings if f.level == "error"}
    if files:  # the config reader is imported only then: not on the hook path
        from ..machine.configs.config import shown_path

        broken = sorted({shown_path(file) for file in files})
        verb, them = ("has", "it") if len(broken) == 1 else ("have", "them")
        sys.stderr.write(
            f"note: {', '.join(broken)} {verb} errors, so machines in {them} aren't "
            "configured; smllm validate tells why\n"
        )


def read_toml_for_edit(path: str) -> tuple[Any, str]:
    """(tomlkit document, BOM) of the config at `path`, to edit and write back with
    `bom + tomlkit.dumps(doc)`, comments and layout kept; `error: can't edit PATH: …`, exit 1.
    A BOM is accepted in a config (as smllm reads it) but not by tomlkit: kept aside."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    from ..files import read_regular
    from ..machine.configs.config import shown_path

    data, problem = read_regular(path)
    if data is None:
        raise Exit(1, f"can't edit {shown_path(path)}: {problem}")
    bom = "\ufeff" if data.startswith(b"\xef\xbb\xbf") else ""
    try:
        return tomlkit.parse(data.decode("utf-8")[len(bom) :]), bom
    except (UnicodeDecodeError, TOMLKitError) as exc:
        raise Exit(1, f"can't edit {shown_path(path)}: {exc}") from None
