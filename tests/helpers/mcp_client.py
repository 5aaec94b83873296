"""A line-by-line JSON-RPC client of a real `smllm mcp` process, for tests and the bench."""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["McpProcess", "NotJson"]


class NotJson(AssertionError):
    """The server wrote a line that isn't one JSON object: a broken stream."""


class McpProcess:
    """`python -m smllm mcp` (or `argv`), spoken to one line at a time."""

    def __init__(
        self,
        cwd: str | Path,
        env: dict[str, str],
        argv: list[str] | None = None,
        python: str = sys.executable,
    ) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [python, "-m", "smllm", "mcp", *(argv or [])],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.err = bytearray()
        self.next_id = 1000
        threading.Thread(target=self._pump_out, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        while chunk := self.proc.stderr.read1(65536):
            self.err += chunk

    # -- writing ------------------------------------------------------------------------------

    def send_raw(self, line: bytes | str) -> None:
        data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
        assert self.proc.stdin is not None
        self.proc.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message))

    # -- reading ------------------------------------------------------------------------------

    def read(self, timeout: float = 30) -> dict[str, Any] | None:
        """The next message written (None: stdout closed); a non-JSON line raises NotJson."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer within {timeout} s; stderr: {self.stderr()}") from None
        if line is None:
            return None
        try:
            value = json.loads(line)
        except ValueError:
            raise NotJson(f"not JSON on stdout: {line!r}") from None
        if not isinstance(value, dict) or not line.endswith(b"\n"):
            raise NotJson(f"not one JSON object a line: {line!r}")
        return value

    def request(self, method: str, params: Any = None, id: Any = None) -> dict[str, Any]:
        """Send a request and return its response (messages for other ids are an error)."""
        if id is None:
            id = self.next_id
            self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        answer = self.read()
        assert answer is not None, f"stdout closed; stderr: {self.stderr()}"
        assert answer.get("id") == id, (answer, id)
        return answer

    def initialize(self, version: str = "2025-11-25") -> dict[str, Any]:
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t"}}
        answer = self.request("initialize", params)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def call(self, arguments: Any, name: str = "smllm") -> dict[str, Any]:
        """A tools/call's whole response."""
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def tool(self, **arguments: Any) -> tuple[str, bool]:
        """(text, isError) of a call of the smllm tool."""
        result = self.call(arguments)["result"]
        content = result["content"]
        assert len(content) == 1 and content[0]["type"] == "text", result
        return content[0]["text"], result["isError"]

    # -- ending -------------------------------------------------------------------------------

    def stderr(self) -> str:
        return self.err.decode("utf-8", "replace")

    def close(self, timeout: float = 30) -> int:
        """End of input; the exit code, once every answer still owed is read."""
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"smllm mcp still running {timeout} s after its input ended; "
                f"stderr: {self.stderr()}"
            ) from None

    def rest(self) -> list[dict[str, Any]]:
        """Every message still to come, up to the end of stdout (after close)."""
        out = []
        while (message := self.read()) is not None:
            out.append(message)
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> McpProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


#: the arguments of a tool call that enters the dev machine for issue GH-3 (test_mcp.py,
#: test_mcp_ending.py)
ENTER = {"event": "enter", "params": {"stateMachine": "dev", "issueId": "GH-3"}}


# -- fuzzing ------------------------------------------------------------------------------------

METHODS = (
    "initialize", "ping", "tools/list", "tools/call", "server/discover", "resources/list",
    "resources/templates/list", "prompts/list", "notifications/initialized",
    "notifications/cancelled", "logging/setLevel", "completion/complete", "", "tools/call/x",
)  # fmt: skip


def fuzz_lines() -> Any:
    """A hypothesis strategy: a few lines for the server (bytes), JSON-RPC-shaped or not."""
    from hypothesis import strategies as st

    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12),
    )
    values = st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
        ),
        max_leaves=8,
    )
    texts = st.one_of(
        st.sampled_from(["dev", "enter", "yield", "pause", "planned", "sm-zzzzzz", ""]),
        st.text(max_size=10),
    )
    params = st.one_of(
        values,
        st.dictionaries(
            st.sampled_from(["stateMachine", "issueId", "state", "note", "size", "x"]),
            st.one_of(texts, values),
            max_size=3,
        ),
    )
    arguments = st.one_of(
        values,
        st.fixed_dictionaries(
            {},
            optional={"session": st.one_of(texts, values), "event": st.one_of(texts, values),
                      "params": params, "other": values},
        ),
    )  # fmt: skip
    call = st.fixed_dictionaries(
        {},
        optional={
            "name": st.one_of(st.just("smllm"), texts, values),
            "arguments": arguments,
            "_meta": values,
        },
    )
    message = st.fixed_dictionaries(
        {"method": st.one_of(st.sampled_from(METHODS), st.text(max_size=8), values)},
        optional={
            "jsonrpc": st.one_of(st.just("2.0"), values),
            "id": st.one_of(st.integers(0, 2**40), st.text(max_size=6), values),
            "params": st.one_of(call, values),
        },
    )
    as_json = st.one_of(message, values, st.lists(message, max_size=2)).map(
        lambda v: json.dumps(v).encode()
    )
    repeated = st.sampled_from(
        [
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"smllm",'
            b'"arguments":{"event":"enter","params":{"stateMachine":"dev","stateMachine":"x"}}}}',
            b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}',
            b'{"jsonrpc":"2.0","id":1,"method":"ping"',
            b"[]",
            b"\xff\xfe",
            b'"\\ud800"',
        ]
    )
    garbage = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b" "))
    return st.lists(st.one_of(as_json, as_json, repeated, garbage), min_size=1, max_size=6)


def _refuse(name: str) -> Any:
    raise ValueError(name)


def _finite(text: str) -> float:
    value = float(text)
    if value - value != 0:
        raise ValueError(text)
    return value


def _valid_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class Fuzzer:
    """Throws lines at one running server and records what went wrong. The rules: a JSON object
    with a usable id (a string or an integer) and a `method` gets exactly one answer with that
    id; one with a usable id and no `method` (a response, or junk) at most one; anything else
    at most answers with a null id. Usable ids are made unique first."""

    def __init__(self, server: McpProcess) -> None:
        self.server = server
        self.count = 0
        self.problems: list[str] = []
        self.tracebacks = self.hangs = self.not_json = self.wrong_answers = 0

    def _sorted(self, line: bytes) -> tuple[bytes, Any, bool]:
        """(the line to send, its id or None, whether an answer is owed)."""
        try:  # as strictly as the server reads: no NaN, no Infinity, no number past a double
            value = json.loads(line, parse_constant=_refuse, parse_float=_finite)
        except (ValueError, RecursionError):
            return line, None, False
        if not isinstance(value, dict) or not _valid_id(value.get("id")):
            return line, None, False
        self.count += 1
        value["id"] = f"fz-{self.count}" if isinstance(value["id"], str) else 10**9 + self.count
        return json.dumps(value).encode(), value["id"], "method" in value

    def run(self, lines: list[bytes], timeout: float = 20) -> list[str]:
        """Send one example's lines and check the answers; the problems found."""
        found: list[str] = []
        owed: dict[Any, int] = {}
        allowed: set[Any] = set()
        for raw in lines:
            line, id_, must = self._sorted(raw)
            if id_ is not None:
                (owed.__setitem__(id_, 1) if must else allowed.add(id_))
            self.server.send_raw(line)
        self.count += 1
        sentinel = f"sentinel-{self.count}"
        self.server.send({"jsonrpc": "2.0", "id": sentinel, "method": "ping"})
        owed[sentinel] = 1
        deadline = time.monotonic() + timeout
        while any(owed.values()):
            try:
                message = self.server.read(timeout=max(deadline - time.monotonic(), 0.01))
            except NotJson as exc:
                self.not_json += 1
                found.append(str(exc))
                continue
            except AssertionError:
                self.hangs += 1
                found.append(f"no answer for {owed} after {lines!r}")
                break
            if message is None:
                self.hangs += 1
                found.append(f"the server ended after {lines!r}: {self.server.stderr()}")
                break
            id_ = message.get("id")
            if id_ is None:
                continue  # an error about a line with no usable id
            if owed.get(id_, 0) > 0:
                owed[id_] -= 1
            elif id_ in allowed:
                allowed.discard(id_)
            else:
                self.wrong_answers += 1
                found.append(f"unexpected answer {message} after {lines!r}")
        if "Traceback" in self.server.stderr() and not self.tracebacks:
            self.tracebacks += 1
            found.append(f"a traceback on stderr after {lines!r}: {self.server.stderr()}")
        self.problems += found
        return found
