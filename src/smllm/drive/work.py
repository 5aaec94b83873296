"""The work tools `smllm run --tools read,write,shell` grants a model: their CAPS declarations,
the policy check made when an ACT is admitted, and running them (issue 22 §3).

Paths are relative to the project folder (`root`) and are walked one component at a time from a
descriptor of root: each folder opened with O_NOFOLLOW | O_DIRECTORY relative to the one before
(dir_fd), the file itself with O_NOFOLLOW. No symlink is followed anywhere, not even one that
points inside root, so what is opened is inside root whatever the path says and whatever the
tree does meanwhile (a symlink swapped in between two steps is refused, not followed). smllm's
own store (`.smllm/state`) is never read or written, `.git` never written.

The shell tool splits the model's text into words (shlex, POSIX rules) and runs that argv list
without a shell, in root, only where an --allow pattern matches it.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import shlex
import stat
from collections.abc import Iterable, Mapping
from typing import Any

from ..api.processes import CommandOutput, run_capturing

__all__ = [
    "OUTPUT_HEAD",
    "OUTPUT_TAIL",
    "READ_LIMIT",
    "WORK_TOOLS",
    "WRITE_LIMIT",
    "ToolRefused",
    "Work",
]

#: the work tools, in the order they are declared
WORK_TOOLS = ("read", "write", "shell")
#: the most bytes one `read` gives (a longer file is cut; `next` says where to go on)
READ_LIMIT = 256 << 10
#: the most bytes one `write` takes (more is refused, not cut)
WRITE_LIMIT = 1 << 20
#: the shell output kept: its first and last bytes (16 KiB in all), the middle cut
OUTPUT_HEAD = 8 << 10
OUTPUT_TAIL = 8 << 10

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: should the file become a FIFO between the stat and the open, the open returns at
# once instead of waiting for a writer (the fstat then refuses it)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_NO_SYMLINKS = "the work tools follow no symlink, not even one pointing inside the project"
_SHOWN_CHARS = 120  # longest path or command quoted back in a message


class ToolRefused(Exception):
    """Why a work tool call did not run or did not finish: its OBS error's `type` and
    `message` (`error()`)."""

    def __init__(self, type: str, message: str) -> None:
        super().__init__(message)
        self.type = type
        self.message = message

    def error(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message}


class Work:
    """The work tools granted to one run: `root` the project folder (a real path), `tools`
    some of WORK_TOOLS, `allow` the fnmatch patterns a shell command must match (none: every
    command refused), `shell_timeout` seconds a command may run."""

    def __init__(
        self,
        root: str,
        tools: Iterable[str],
        allow: Iterable[str] = (),
        shell_timeout: float = 60.0,
    ) -> None:
        granted = set(tools)
        unknown = sorted(granted - set(WORK_TOOLS))
        if unknown:
            raise ValueError(
                f"unknown work tool {unknown[0]!r}: the work tools are read, write and shell"
            )
        self.root = root
        self.tools = tuple(name for name in WORK_TOOLS if name in granted)
        self.allow = tuple(allow)
        self.shell_timeout = shell_timeout

    def declarations(self) -> list[dict[str, Any]]:
        """The CAPS tool declarations of the granted tools, in the order of WORK_TOOLS."""
        return [self._declaration(name) for name in self.tools]

    def refusal(self, name: str, arguments: Any) -> str | None:
        """Why the ACT `name(arguments)` may not run (None: it may): a tool not granted, a
        shell command that can't be split into words or that no --allow pattern matches.
        Path checks happen in `run`, where the file system is walked."""
        if name not in self.tools:
            return f"the work tool {name!r} is not granted in this run"
        if name != "shell":
            return None
        return self._argv(arguments)[1]

    def run(self, name: str, arguments: Any) -> tuple[bool, Any]:
        """Run one work tool ACT: `(True, value)`, or `(False, {"type", "message"})` for a
        refusal or an OS error. Checks the policy again itself; never raises for bad input."""
        try:
            if name not in self.tools:
                raise ToolRefused(
                    "policy_denied", f"the work tool {name!r} is not granted in this run"
                )
            if not isinstance(arguments, Mapping):
                raise ToolRefused("invalid_arguments", f"{name} takes a JSON object")
            if name == "read":
                return True, self._read(arguments)
            if name == "write":
                return True, self._write(arguments)
            return True, self._shell(arguments)
        except ToolRefused as refused:
            return False, refused.error()
        except OSError as exc:
            return False, {"type": "os_error", "message": _os_reason(exc)}

    # -- declarations ----------------------------------------------------------------------

    def _declaration(self, name: str) -> dict[str, Any]:
        path = {
            "type": "string",
            "description": "relative to the project folder, e.g. src/app.py",
        }
        if name == "read":
            description = (
                "Read a UTF-8 text file of the project. "
                + _PATH_RULES
                + f" Gives at most {READ_LIMIT >> 10} KiB, from `offset` (bytes, default 0), cut"
                " on a character boundary: then `truncated` is true and `next` is the offset to"
                " read on from. `bytes` is the file's full size. Binary files are refused."
            )
            properties: dict[str, Any] = {
                "path": path,
                "offset": {"type": "integer", "minimum": 0},
            }
            return _tool(name, description, properties, ["path"])
        if name == "write":
            description = (
                "Write a UTF-8 text file of the project whole: create it (and any missing"
                " folders) or replace it, atomically; an existing file keeps its mode. "
                + _PATH_RULES
                + " Never inside `.git`. `content` is at most 1 MiB."
            )
            properties = {"path": path, "content": {"type": "string"}}
            return _tool(name, description, properties, ["path", "content"])
        if self.allow:
            allowed = "Allowed only when the command matches one of these patterns: " + ", ".join(
                f"`{pattern}`" for pattern in self.allow
            )
        else:
            allowed = "No command is allowed in this run (it was given no --allow pattern)"
        description = (
            "Run one command in the project folder, without a shell: the text is split into"
            " words as a POSIX shell would (quotes, backslashes), but pipes, redirections, `;`,"
            " `&&`, variables and globs are not interpreted: they reach the command as literal"
            f" words. {allowed} (fnmatch globs over the words joined back with shell quoting)."
            f" Stdin is empty. After {self.shell_timeout:g} s the command and everything it"
            " started are killed (`timedOut`). Gives `exit` (the exit status; a nonzero one is a"
            " result, not an error; negative: killed by that signal) and `output` (stdout and"
            f" stderr together; past {(OUTPUT_HEAD + OUTPUT_TAIL) >> 10} KiB only its first and"
            " last 8 KiB, `truncated` true and the cut marked)."
        )
        properties = {"command": {"type": "string", "description": "e.g. pytest -q tests"}}
        return _tool(name, description, properties, ["command"])

    # -- read and write --------------------------------------------------------------------

    def _read(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        parts = _parts(arguments.get("path"), writing=False)
        offset = arguments.get("offset", 0)
        if type(offset) is not int or offset < 0:
            raise ToolRefused("invalid_arguments", "`offset` must be an integer ≥ 0 (bytes)")
        shown = "/".join(parts)
        folder = self._folder(parts, create=False)
        try:
            fd = _open_regular(folder, parts[-1], shown)
        finally:
            os.close(folder)
        try:
            size = os.fstat(fd).st_size
            offset = min(offset, size)  # past the end: nothing (and no OverflowError)
            raw = _pread_all(fd, READ_LIMIT + 4, offset)
        finally:
            os.close(fd)
        # An offset inside a character starts at the next one.
        skip = _continuation_bytes(raw[:3])
        body = raw[skip : skip + READ_LIMIT + 1]
        truncated = len(body) > READ_LIMIT
        if truncated:
            body = _whole_characters(body[:READ_LIMIT])
        try:
            content: str | None = body.decode("utf-8")
        except UnicodeDecodeError:
            content = None
        if content is None or "\0" in content:
            raise ToolRefused("not_text", f"{_show(shown)} is binary (not UTF-8 text): not read")
        following = offset + skip + len(body) if truncated else None
        return {
            "path": shown,
            "content": content,
            "bytes": size,
            "truncated": truncated,
            "next": following,
        }

    def _write(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        parts = _parts(arguments.get("path"), writing=True)
        content = arguments.get("content")
        if not isinstance(content, str):
            raise ToolRefused("invalid_arguments", "write needs a `content` string")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate ("\ud800" in the JSON)
            raise ToolRefused(
                "invalid_arguments", "`content` is not valid Unicode text (a lone surrogate)"
            ) from None
        if len(data) > WRITE_LIMIT:
            raise ToolRefused(
                "too_large",
                f"the content is {len(data)} bytes; write takes at most 1 MiB"
                f" ({WRITE_LIMIT} bytes): write a smaller file",
            )
        shown = "/".join(parts)
        folder = self._folder(parts, create=True)
        try:
            _replace(folder, parts[-1], shown, data)
        finally:
            os.close(folder)
        return {"path": shown, "bytes": len(data)}

    def _folder(self, parts: list[str], *, create: bool) -> int:
        """A descriptor of the folder holding the last of `parts`, opened from root one
        component at a time, following no symlink; missing folders are made when `create`."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for depth, name in enumerate(parts[:-1], 1):
                inner = _open_folder(fd, name, "/".join(parts[:depth]), create)
                os.close(fd)
                fd = inner
        except BaseException:
            os.close(fd)
            raise
        return fd

    # -- shell -----------------------------------------------------------------------------

    def _argv(self, arguments: Any) -> tuple[list[str], str | None]:
        """The command's words, and why it may not run (None: it may)."""
        command = arguments.get("command") if isinstance(arguments, Mapping) else None
        if not isinstance(command, str):
            return [], "shell needs a `command` string"
        if "\0" in command:
            return [], "the command holds a NUL character"
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            return [], f"the command can't be split into words ({exc}): quote it as sh would"
        if not argv:
            return [], "the command is empty"
        joined = shlex.join(argv)
        if not self.allow:
            return argv, "no command is allowed in this run (smllm run got no --allow pattern)"
        if not any(fnmatch.fnmatchcase(joined, pattern) for pattern in self.allow):
            patterns = ", ".join(self.allow)
            return argv, f"{_show(joined)} matches no --allow pattern of this run ({patterns})"
        return argv, None

    def _shell(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        argv, refused = self._argv(arguments)
        if refused is not None:
            raise ToolRefused("policy_denied", refused)
        ended = run_capturing(
            argv,
            cwd=self.root,
            env=os.environ,
            timeout=self.shell_timeout,
            head=OUTPUT_HEAD,
            tail=OUTPUT_TAIL,
        )
        if isinstance(ended, str):
            raise ToolRefused("not_started", f"{_show(argv[0])} could not start: {ended}")
        return {
            "exit": ended.exit,
            "output": _output_text(ended),
            "truncated": ended.cut > 0,
            "timedOut": ended.exit is None,
        }


_PATH_RULES = (
    "`path` is relative to the project folder: no absolute path, no `..`, no symlink"
    " (not even one pointing inside the project), never `.smllm/state`."
)


def _tool(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    parameters = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return {"name": name, "description": description, "parameters": parameters}


def _parts(path: object, *, writing: bool) -> list[str]:
    """`path`'s components, or ToolRefused where the policy refuses it; touches nothing."""
    if not isinstance(path, str):
        raise ToolRefused("invalid_arguments", "`path` must be a string")
    if not path:
        raise ToolRefused("policy_denied", "the path is empty: give one relative to the project")
    if "\0" in path:
        raise ToolRefused("policy_denied", "the path holds a NUL character")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolRefused("policy_denied", "the path is not valid Unicode text") from None
    if path.startswith("/"):
        raise ToolRefused(
            "policy_denied", f"{_show(path)} is absolute: give it relative to the project folder"
        )
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ToolRefused(
            "policy_denied", f"{_show(path)} has a `..` component: paths stay in the project"
        )
    if not parts or path.endswith("/"):
        raise ToolRefused("not_a_file", f"{_show(path)} names a folder, not a file")
    folded = [part.casefold() for part in parts]
    if folded[:2] == [".smllm", "state"]:
        raise ToolRefused(
            "policy_denied", "`.smllm/state` is smllm's own store: the work tools never touch it"
        )
    if writing and ".git" in folded:
        raise ToolRefused("policy_denied", "`.git` is git's own: write never changes it")
    return parts


def _open_folder(parent: int, name: str, shown: str, create: bool) -> int:
    for attempt in range(2):
        try:
            return os.open(name, _FOLDER_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create or attempt:
                raise ToolRefused("not_found", f"no folder {_show(shown)} in the project") from None
            with contextlib.suppress(FileExistsError):  # made meanwhile: open it
                os.mkdir(name, 0o777, dir_fd=parent)
        except OSError as exc:
            if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
            if stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                raise ToolRefused(
                    "policy_denied", f"{_show(shown)} is a symlink: {_NO_SYMLINKS}"
                ) from None
            raise ToolRefused("not_a_file", f"{_show(shown)} is not a folder") from None
    raise AssertionError("unreachable")  # pragma: no cover


def _check_file(info: os.stat_result, shown: str) -> None:
    """ToolRefused unless `info` (not following symlinks) is a regular file's."""
    if stat.S_ISLNK(info.st_mode):
        raise ToolRefused("policy_denied", f"{_show(shown)} is a symlink: {_NO_SYMLINKS}")
    if stat.S_ISDIR(info.st_mode):
        raise ToolRefused("not_a_file", f"{_show(shown)} is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise ToolRefused(
            "not_a_file", f"{_show(shown)} is not a regular file (a FIFO, socket or device)"
        )


def _open_regular(folder: int, name: str, shown: str) -> int:
    """A read descriptor of the regular file `name` in `folder`. Stat before open: opening a
    device can have effects of its own, and a FIFO would wait for a writer."""
    try:
        _check_file(os.stat(name, dir_fd=folder, follow_symlinks=False), shown)
        fd = os.open(name, _READ_FLAGS, dir_fd=folder)
    except FileNotFoundError:
        raise ToolRefused("not_found", f"no file {_show(shown)} in the project") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # made a symlink since the stat
            raise ToolRefused(
                "policy_denied", f"{_show(shown)} is a symlink: {_NO_SYMLINKS}"
            ) from None
        raise
    try:
        _check_file(os.fstat(fd), shown)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _replace(folder: int, name: str, shown: str, data: bytes) -> None:
    """Make `name` in `folder` hold `data`, whole or not at all: a temporary file beside it,
    synced, then renamed over it (a rename replaces a symlink put there meanwhile, never
    writes through it). Keeps an existing file's mode; leaves no temporary file on error."""
    try:
        info: os.stat_result | None = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        info = None
    if info is not None:
        _check_file(info, shown)
    # a short name: NAME plus a suffix could pass the 255 bytes a name may have
    temp = f".smllm-{os.urandom(6).hex()}.tmp"
    fd = os.open(temp, _TEMP_FLAGS, 0o666, dir_fd=folder)  # a new file's mode: as umask says
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if info is not None:
                os.fchmod(fd, stat.S_IMODE(info.st_mode))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=folder)
        raise
    with contextlib.suppress(OSError):  # the rename itself durable (best effort)
        os.fsync(folder)


def _pread_all(fd: int, size: int, offset: int) -> bytes:
    chunks = []
    while size > 0 and (chunk := os.pread(fd, size, offset)):
        chunks.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _continuation_bytes(data: bytes) -> int:
    """How many of `data`'s first bytes continue a UTF-8 character begun before them."""
    count = 0
    while count < len(data) and data[count] & 0xC0 == 0x80:
        count += 1
    return count


def _whole_characters(data: bytes) -> bytes:
    """`data` less a UTF-8 character its end cuts in two."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: look further back for the character's start
        needs = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4 if byte >= 0xF0 else 1
        return data[:-back] if needs > back else data
    return data


def _output_text(ended: CommandOutput) -> str:
    """The kept output as text; where the middle was cut, a marker says how much."""
    if not ended.cut:
        return (ended.head + ended.tail).decode("utf-8", errors="replace")
    head = _whole_characters(ended.head)
    skip = _continuation_bytes(ended.tail[:3])
    cut = ended.cut + len(ended.head) - len(head) + skip
    return (
        head.decode("utf-8", errors="replace")
        + f"\n[… {cut} bytes of output cut here …]\n"
        + ended.tail[skip:].decode("utf-8", errors="replace")
    )


def _show(text: str) -> str:
    """`text` as a message quotes it: in backticks, at most _SHOWN_CHARS characters."""
    return f"`{text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + '…'}`"


def _os_reason(exc: OSError) -> str:
    """The OS's reason, without "[Errno N]" or the full path."""
    return exc.strerror or str(exc)
