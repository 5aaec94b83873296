"""`smllm harness hook NAME HOOK`: the hooks each client runs (cli-and-harnesses.md §5).

The client pipes one JSON object to the hook and reads its answer on stdout. Every answer is
JSON with exit 0; a failure of any kind is exit 1, `error: …` on stderr and nothing on stdout,
which every client takes as non-blocking, so a broken smllm never wedges an agent.

Input: the JSON object on stdin (bad JSON, or anything but an object, counts as `{}`; unknown
fields are ignored; a known field of the wrong type counts as absent). It is read within
STDIN_SECONDS and up to STDIN_LIMIT bytes: a body past the limit is a failure (its fields were
never read, so any answer would be a guess), as is a pipe that stays open past the deadline
without a whole JSON object in it.

This module runs on every prompt and stop of an agent: it imports only what each hook needs,
when it needs it.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, TextIO

    from ..engine.records import Session
    from ..store.sqlite import SqliteStore

__all__ = [
    "HARNESSES",
    "HOOKS",
    "STDIN_LIMIT",
    "STDIN_SECONDS",
    "HookFailed",
    "answer",
    "run_hook",
]

HARNESSES = ("claude", "codex", "copilot", "opencode")
HOOKS = ("session-start", "user-prompt-submit", "stop")

#: the largest hook input read: payloads are a few hundred bytes, but a pasted prompt or a long
#: last assistant message rides along; 10 MB must still be answered
STDIN_LIMIT = 32 << 20
#: how long the input may take to arrive and close: clients write it and close at once
STDIN_SECONDS = 2.0
#: a host session id longer than this is not one (it would become a binding's key)
ID_LIMIT = 1024

#: the field holding the client's session id
_ID_FIELD = {"claude": "session_id", "codex": "session_id", "opencode": "session_id"}


class HookFailed(Exception):
    """The hook can't answer; the message goes after `error: `."""


def _input(stdin: bytes | None) -> bytes | bytearray:
    """The raw input: `stdin` when given (in-process callers), else the process's stdin."""
    if stdin is not None:
        if len(stdin) > STDIN_LIMIT:
            raise HookFailed(_too_large())
        return stdin
    stream = sys.stdin
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError):  # closed, or not a real file
        fd = -1
    if fd < 0:
        return b""  # started with stdin closed: no input, which counts as {}
    if os.isatty(fd):
        raise HookFailed("the hook reads its client's JSON on standard input, not a terminal")
    from .stdin import StdinTimeout, StdinTooLarge, read_bounded

    try:
        return read_bounded(fd, STDIN_LIMIT, STDIN_SECONDS)
    except StdinTooLarge:
        raise HookFailed(_too_large()) from None
    except StdinTimeout as exc:
        # a client that wrote its object and left the pipe open: the object is the input
        if isinstance(_parsed(exc.partial), dict):
            return exc.partial
        raise HookFailed(
            f"standard input didn't close within {STDIN_SECONDS:g} s without a JSON object"
        ) from None


def _too_large() -> str:
    return f"the hook input is larger than {STDIN_LIMIT >> 20} MiB"


def _parsed(raw: bytes | bytearray) -> object:
    """The JSON value of `raw` (UTF-8, a BOM allowed), or None when it is none."""
    from ..jsontext import loads

    if raw[:3] == b"\xef\xbb\xbf":  # by hand: the utf-8-sig codec is one more import
        raw = raw[3:]
    try:
        return loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def _text(payload: Mapping[str, Any], field: str, limit: int | None = None) -> str | None:
    """A text field of the input; None when absent, empty or longer than `limit`. JSON can
    carry a lone surrogate (`"\\ud800"`), which no file or store can hold: HookFailed says so
    (the prompt, only compared, gets U+FFFD in its place instead)."""
    value = payload.get(field)
    if not isinstance(value, str) or not value:
        return None
    if limit is not None and len(value) > limit:
        return None
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            if field == "prompt":
                return value.encode("utf-8", "replace").decode("utf-8")
            bad = f"\\u{ord(value[exc.start]):04x}"
            raise HookFailed(
                f"the hook input's {field} is not text: it holds a lone surrogate ({bad})"
            ) from None
    return value


def _cwd(payload: Mapping[str, Any]) -> str:
    cwd = _text(payload, "cwd")
    if cwd is None:
        return os.getcwd()
    if "\0" in cwd:
        raise HookFailed("the hook input's cwd is not a path (it holds a NUL character)")
    return os.path.abspath(cwd)


def answer(name: str, hook: str, payload: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The client's answer to `hook` for `payload`, and what goes to stderr (or "")."""
    if name == "claude" and "timestamp" in payload:
        # Copilot runs .claude/settings.json hooks too, and its payloads carry a timestamp
        # (Claude's don't): its own hooks do the work, this one stays out of it
        return {}, ""
    host_session = _text(payload, _ID_FIELD.get(name, "sessionId"), ID_LIMIT)
    if host_session is None:
        return {}, ""
    from ..store.user import user_store

    # one connection for the whole hook: the binding is read through it without the API,
    # whose machine and engine modules a stop or prompt with nothing to do never needs
    user = user_store()
    try:
        return _answer(name, hook, payload, host_session, user)
    finally:
        user.close()


def _answer(
    name: str, hook: str, payload: Mapping[str, Any], host_session: str, user: SqliteStore
) -> tuple[dict[str, Any], str]:
    if hook == "session-start":
        from ..api.app import App

        cwd = _cwd(payload)
        bound = App(cwd=cwd, user=user).bind(name, host_session, cwd)
        if bound is None:  # no session and no config here: quiet outside smllm
            return {}, ""
        from .starttext import start_text

        text = start_text(bound.reply)
        if name == "copilot":
            return {"additionalContext": text}, ""
        return {
            "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}
        }, ""
    session = user.binding(name, host_session)
    if session is None:  # rule 1 of engine.md §9, and quiet outside smllm
        return {}, ""
    if hook == "user-prompt-submit":
        if session.yielded or session.blocks:  # else nothing to clear: no lock, no write
            # without the App: clearing them needs no machine, engine or config
            from ..api.sessions import prompt_submitted
            from ..api.system import SystemHost

            prompt_submitted(user, SystemHost(), session.key, _text(payload, "prompt"))
        return {}, ""
    if session.holding is None:
        # rule 2: idle stops freely, without loading the configs (§5: an allowing stop
        # shouldn't); a session that a crash left idle while an instance names it as holder
        # is repaired by its next fire or view (engine.md §7.1, §10)
        return {}, ""
    from ..api.stores import brokered

    # a PostgreSQL store is read through its broker (store/brokered.py): a stop then imports no
    # psycopg and opens no connection of its own
    with brokered():
        return _stop(payload, session, user)


def _stop(
    payload: Mapping[str, Any], session: Session, user: SqliteStore
) -> tuple[dict[str, Any], str]:
    """The stop of a session holding an instance (engine.md §9, rules 3 – 7)."""
    from ..api.stores import Stores
    from ..engine.stop import stops_yielded
    from ..machine.configs.cache import summary_cached

    # rule 4 on the machines' summary: no App, no machines, no views (engine/stop.py); only a
    # yielded session can stop that way, so a blocking stop reads the machine cache once (App)
    if session.yielded:
        summary = summary_cached(session.configs)
        if stops_yielded(summary, session, Stores(summary, user)):
            return {}, ""
    from ..api.app import App

    active = payload.get("stop_hook_active")
    app = App(cwd=_cwd(payload), user=user)
    outcome = app.stop(session.key, active if isinstance(active, bool) else None)
    if outcome.reply is None or outcome.decision == "allow":
        return {}, ""
    reason = outcome.text
    if reason is None:  # a runaway: the engine rendered nothing, having no digest to record
        from ..text.block import render

        reason = render(outcome.reply)
    if outcome.decision == "runaway":
        return {}, reason + "\n"
    return {"decision": "block", "reason": reason}, ""


def _fail(err: TextIO, message: str, environ: Mapping[str, str]) -> int:
    from ..errors import debug_traceback

    err.write(f"error: {message}\n")
    debug_traceback(err, environ)
    err.flush()
    return 1


def run_hook(
    name: str,
    hook: str,
    *,
    stdin: bytes | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run one hook: read its input, answer on stdout; the exit code.

    `stdin`, `stdout`, `stderr`, `environ` stand in for the process's own (tests, benches)."""
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    env = os.environ if environ is None else environ
    if name not in HARNESSES:
        return _fail(err, f"no harness named {name} ({', '.join(HARNESSES)})", {})
    if hook not in HOOKS:
        return _fail(err, f"no hook named {hook} ({', '.join(HOOKS)})", {})
    try:
        payload = _parsed(_input(stdin))
        reply, note = answer(name, hook, payload if isinstance(payload, dict) else {})
        from ..jsontext import dumps

        data = (dumps(reply) + "\n").encode("utf-8")
    except HookFailed as exc:
        return _fail(err, str(exc), env)
    except KeyboardInterrupt:
        return _fail(err, "interrupted", env)
    except Exception as exc:  # a failure of any kind: exit 1, empty stdout, no traceback
        from ..errors import SmllmError, internal_error

        if isinstance(exc, SmllmError):
            return _fail(err, str(exc), env)
        return _fail(err, internal_error(exc), env)
    if note:
        err.write(note)
        err.flush()
    return _emit(out, data, err, env)


def _emit(out: TextIO, data: bytes, err: TextIO, environ: Mapping[str, str]) -> int:
    """Write the answer's bytes; a closed stdout pipe ends the hook quietly (as every command
    does, cli-and-harnesses.md §1)."""
    try:
        buffer = getattr(out, "buffer", None)
        if buffer is None:
            out.write(data.decode("utf-8"))
            out.flush()
        else:
            out.flush()
            buffer.write(data)
            buffer.flush()
    except BrokenPipeError:
        from ..errors import quiet_closed_stdout

        quiet_closed_stdout(out)
        return 0
    except (OSError, ValueError) as exc:
        return _fail(err, f"can't write the answer: {exc}", environ)
    return 0
