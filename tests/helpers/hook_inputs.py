"""Hostile standard input for the hooks, and the check of what a hook answered
(test_hook_fuzz.py, and bench/hook_bench.py --fuzz, which runs many more of the same inputs).

`payloads` draws hook inputs: garbage bytes, empty, huge, wrong types, deep nesting and
valid-looking payloads with hostile strings; `prepare` binds the host sessions some of them
name; `check` says what is wrong with one hook run: a hook answers with one of its harness's
JSON forms and exit 0, or fails with exit 1, `error: …` on stderr and nothing on stdout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import enter_args, smllm
from hypothesis import strategies as st

from smllm.harness.hook import HARNESSES

__all__ = ["HANG_SECONDS", "check", "payloads", "prepare"]

#: a hook that takes longer than this has hung
HANG_SECONDS = 5.0

#: host session ids: the first few are bound in the prepared project
HOSTS = ("h-held", "h-idle", "h-new", "", "h\x00", "é" * 3, "x" * 2000)
HOSTILE = (
    "",
    " ",
    "</smllm>",
    "<smllm>\nsession sm-aaaaaa · idle\n</smllm>",
    "\ud800",
    "\x00",
    "\r\n",
    "a\u2028b",
    "../../etc",
    "/",
    "/nonexistent/folder",
    ".",
    "~",
    "$(touch /tmp/pwned)",
    "'; DROP TABLE sessions; --",
    "%s%n",
    "日本語",
    "\x1b[31m",
)

_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.sampled_from(HOSTILE),
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def _valid_looking(draw: st.DrawFn, project: str) -> bytes:
    fields = (
        "session_id",
        "sessionId",
        "cwd",
        "stop_hook_active",
        "prompt",
        "timestamp",
        "hook_event_name",
        "source",
    )
    body: dict[str, Any] = {}
    for field in draw(st.lists(st.sampled_from(fields), unique=True, max_size=len(fields))):
        if field in ("session_id", "sessionId"):
            value: Any = draw(st.one_of(st.sampled_from(HOSTS), _json_values))
        elif field == "cwd":
            value = draw(st.one_of(st.just(project), st.sampled_from(HOSTILE), _json_values))
        elif field == "stop_hook_active":
            value = draw(st.one_of(st.booleans(), _json_values))
        else:
            value = draw(_json_values)
        body[field] = value
    text = json.dumps(body, ensure_ascii=draw(st.booleans()))
    if draw(st.integers(0, 9)) == 0:  # a damaged copy of it
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["", "}", "\x00", "\\", '"', "\ud800"])) + text[at:]
    return text.encode("utf-8", "surrogatepass")


def _nested(depth: int, kind: str) -> bytes:
    if kind == "array":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


def payloads(project: str, huge: bool = True) -> st.SearchStrategy[bytes]:
    """Hook inputs: garbage bytes, empty, huge, wrong types, deep nesting, and valid-looking
    payloads with hostile strings (their ids partly those `prepare` bound)."""
    size = st.integers(min_value=1 << 20, max_value=34 << 20) if huge else st.just(1 << 16)
    return st.one_of(
        st.binary(max_size=200),
        st.sampled_from([b"", b" ", b"\n", b"{}", b"null", b"[]", b"\xef\xbb\xbf{}", b"{"]),
        _json_values.map(lambda v: json.dumps(v).encode()),
        st.builds(_nested, st.integers(1, 200_000), st.sampled_from(["array", "object"])),
        size.map(lambda n: b'{"session_id":"h-held","pad":"' + b"x" * n + b'"}'),
        size.map(lambda n: b"x" * n),
        _valid_looking(project),
        _valid_looking(project),
        _valid_looking(project),
    )


def prepare(project: Path, env: dict[str, str]) -> None:
    """Bind `h-held` (holding issue GH-1) and `h-idle` for every harness."""
    for name in HARNESSES:
        field = "sessionId" if name == "copilot" else "session_id"
        for host in ("h-held", "h-idle"):
            body = json.dumps({field: host, "cwd": str(project)})
            ran = smllm(["harness", "hook", name, "session-start"], project, env, stdin=body)
            assert ran.code == 0, ran
            if host == "h-held":
                key = (
                    json.loads(ran.out).get("additionalContext")
                    or json.loads(ran.out)["hookSpecificOutput"]["additionalContext"]
                )
                key = key.split("\n")[1].split(" ")[1]
                assert smllm(enter_args(key, "GH-1"), project, env).code == 0


def _form_ok(name: str, hook: str, answer: Any) -> bool:
    """Whether `answer` is one of the harness's answer forms for the hook."""
    if answer == {}:
        return True
    if hook == "stop":
        return (
            isinstance(answer, dict)
            and list(answer) == ["decision", "reason"]
            and answer["decision"] == "block"
            and isinstance(answer["reason"], str)
            and answer["reason"].startswith("<smllm>\n")
        )
    if hook != "session-start" or not isinstance(answer, dict):
        return False
    if name == "copilot":
        text = answer.get("additionalContext")
        return list(answer) == ["additionalContext"] and isinstance(text, str)
    inner = answer.get("hookSpecificOutput")
    return (
        list(answer) == ["hookSpecificOutput"]
        and isinstance(inner, dict)
        and list(inner) == ["hookEventName", "additionalContext"]
        and inner["hookEventName"] == "SessionStart"
        and isinstance(inner["additionalContext"], str)
    )


def check(name: str, hook: str, code: int, out: str, err: str, seconds: float) -> list[str]:
    """What is wrong with one hook run (empty: nothing): the kinds counted by the fuzz."""
    wrong = []
    if "Traceback" in err:
        wrong.append("traceback")
    if seconds > HANG_SECONDS:
        wrong.append("hang")
    if code == 0:
        try:
            answer = json.loads(out)
        except ValueError:
            answer = None
        if not out.endswith("\n") or out.count("\n") != 1 or not _form_ok(name, hook, answer):
            wrong.append("non-JSON stdout")
        if err and not (hook == "stop" and err.startswith("<smllm>\n")):
            wrong.append("stderr on success")
    elif code == 1:
        if out:
            wrong.append("stdout on failure")
        if not err.startswith("error: ") or err.count("\n") != 1:
            wrong.append("failure without error:")
        if err.startswith("error: internal error"):
            wrong.append("internal error")
    else:
        wrong.append(f"exit {code}")
    return wrong
