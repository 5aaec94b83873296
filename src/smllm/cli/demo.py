"""`smllm demo`: a scripted agent plays the seed's example machine in a throw-away folder."""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from importlib import resources

__all__ = ["copy_example", "run_demo", "throwaway"]


def _fire(*words: str) -> list[str]:
    return ["fire", "--session", "{key}", *words]


_ENTER_GH12 = _fire("enter", "--param", "stateMachine=dev", "--param", "issueId=GH-12")
_PLANNED = _fire("planned", "--param", "size=small")

#: (what the agent does, the command) — enter, a failing guard, the fix, yield, pause,
#: continue, done. `{key}` is the session key once the session exists.
SCRIPT: tuple[tuple[str, list[str]], ...] = (
    ("The session starts in idle; the agent reads the idle list.", ["session", "new"]),
    ("It enters the dev machine for issue GH-12.", _ENTER_GH12),
    ("It fires planned before writing the plan: the guard fails, PLAN is entered again.", _PLANNED),
    ("It writes the plan.", ["!write", "PLAN.md", "Rename the option `--colour` to `--color`.\n"]),
    ("Now the guard passes.", _PLANNED),
    (
        "It needs the user's approval, so it yields before ending its turn.",
        _fire("yield", "--param", "note=Waiting for the user to approve the plan."),
    ),
    ("The work has to wait for a review: it pauses the issue.", _fire("pause")),
    ("Later it continues the paused issue.", _ENTER_GH12),
    ("It makes the change and fires done: the issue completes.", _fire("done")),
)


def copy_example(folder: str) -> None:
    """Lay the example project (`.smllm/config.toml`, `.smllm/dev.smllm.yaml`) in `folder`."""
    target = os.path.join(folder, ".smllm")
    os.makedirs(target, exist_ok=True)
    source = resources.files("smllm.examples") / "dev"
    for name in ("config.toml", "dev.smllm.yaml"):
        with open(os.path.join(target, name), "w", encoding="utf-8") as f:
            f.write((source / name).read_text(encoding="utf-8"))


@contextlib.contextmanager
def throwaway(
    prefix: str, parent: str | None = None, keep: bool = False
) -> Iterator[tuple[str, dict[str, str]]]:
    """A temp folder holding smllm's XDG folders (state, cache, config): os.environ points
    at them while inside, so nothing of the user's is read or written; removed afterwards
    unless `keep`. Yields the folder and the environment."""
    root = tempfile.mkdtemp(prefix=prefix, dir=parent)
    values = {
        name: os.path.join(root, f".{name.lower()}")
        for name in ("XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")
    }
    saved = {k: os.environ.get(k) for k in [*values, "SMLLM_CONFIG"]}
    os.environ.update(values)
    os.environ.pop("SMLLM_CONFIG", None)
    try:
        yield root, dict(os.environ)
    finally:
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def run_demo(keep: bool = False) -> int:
    from .main import main

    old_cwd = os.getcwd()
    with throwaway("smllm-demo-", keep=keep) as (folder, _env):
        try:
            copy_example(folder)
            os.chdir(folder)
            return _play(folder, main)
        finally:
            os.chdir(old_cwd)
            if keep:
                print(f"# kept {folder}")


def _play(folder: str, main: Callable[[list[str]], int]) -> int:
    print(f"# A throw-away project in {folder}, with the example machine:")
    print("# .smllm/config.toml lists .smllm/dev.smllm.yaml (smllm's seed machine 'dev').")
    key = ""
    for say, argv in SCRIPT:
        print()
        print(f"# {say}")
        if argv[0] == "!write":
            shown = argv[2].replace("\n", "\\n")
            print(f"$ printf '{shown}' > {argv[1]}")
            with open(argv[1], "w", encoding="utf-8") as f:
                f.write(argv[2])
            continue
        args = [a.replace("{key}", key) for a in argv]
        print("$ smllm " + " ".join(shlex.quote(a) for a in args))
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            code = main(args)
        text = buffer.getvalue()
        sys.stdout.write(text)
        if not key and text.startswith("<smllm>\nsession sm-"):
            key = text.split()[2]
        if code != 0:
            print(f"[exit {code}]")
            return code
    print()
    print(
        "# Done: issue GH-12 is completed. Each block told the agent what to do next, and the"
        " guard kept it in PLAN until PLAN.md existed."
    )
    return 0
