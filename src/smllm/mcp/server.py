"""`smllm mcp`: the stdio MCP server (cli-and-harnesses.md §4), on the official `mcp` SDK (1.x).

Start-up order, for a quick `initialize` answer: the protocol stream moves off fd 1 (which then
points at stderr, so nothing a guard or action command writes can reach the client), a reader
thread starts at once and answers `initialize` (and what `wire.py` answers) itself, while the
main thread imports the SDK (most of start-up's time) and then runs its low-level server on
the messages the reader forwards. Tool calls run one at a time on the event loop's thread,
each through one long-lived App whose compiled-config cache re-checks the files before every
call. End of input: the answers still owed are written, then exit 0.
"""

from __future__ import annotations

import os
import sys

from .wire import INVALID_REQUEST, Inbox, Stash, Wire, error_response, sort_line

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from .tool import Watch

__all__ = ["serve"]


def serve(config: str | None, watch: Watch | None = None) -> int:
    """Serve MCP on stdin/stdout until stdin ends; the exit code. `watch`: what notes, in a
    reply, a client whose hooks don't run (the CLI gives harness/seen.py's)."""
    import gc
    import threading

    gc.enable()  # the CLI turns it off for short commands; a server lives long
    wire = Wire(_protocol_fd())
    inbox = Inbox()
    stash = Stash()
    reader = threading.Thread(target=_read, args=(wire, inbox, stash), name="smllm-mcp-reader")
    reader.daemon = True
    reader.start()
    # the tool's side (the API, its engine and stores) loads after the reader has started,
    # which answers initialize and tools/list without it
    from .tool import Caller

    try:
        import anyio

        from . import sdk
    except ImportError as exc:
        sys.stderr.write(f"error: smllm mcp needs the mcp package: {exc}\n")
        return 2
    _quiet_logging()
    gc.freeze()  # the imports' objects: never scanned again
    anyio.run(sdk.run, wire, inbox, stash, Caller(config, watch))
    return 0


def _protocol_fd() -> int:
    """A private copy of stdout for the protocol; fd 1 (and sys.stdout) become stderr, so a
    command run by a guard or an action, or any stray print, never writes into the stream."""
    fd = os.dup(1)  # not inherited by children (PEP 446)
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return fd


def _read(wire: Wire, inbox: Inbox, stash: Stash) -> None:
    """The reader thread: each line sorted (wire.sort_line); None at the end of input."""
    try:
        stdin = os.fdopen(0, "rb", closefd=False)
        for raw in stdin:
            line = raw.strip()
            if not line:
                continue
            try:
                what, message = sort_line(line, stash)
            except Exception as exc:  # never a traceback: answer what can be answered
                sys.stderr.write(f"smllm mcp: unreadable message: {type(exc).__name__}\n")
                what, message = "reply", error_response(None, INVALID_REQUEST, "Invalid Request")
            if what == "reply":
                wire.send(message)
            elif what == "forward":
                inbox.put(message)
    except (OSError, ValueError):
        pass  # stdin closed or unreadable: the same as its end
    finally:
        stash.ended = True
        inbox.put(None)


def _quiet_logging() -> None:
    """The SDK's log records as one stderr line each, tracebacks left out."""
    import logging

    class OneLine(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                text = record.getMessage().replace("\n", " ")[:500]
                sys.stderr.write(f"smllm mcp: {record.levelname.lower()}: {text}\n")
            except Exception:  # a log line is never worth a crash
                pass

    root = logging.getLogger()
    root.handlers[:] = [OneLine()]
    root.setLevel(logging.WARNING)
