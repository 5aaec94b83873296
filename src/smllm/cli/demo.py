"""`smllm demo`: a scripted agent plays the seed's example machine in a throw-away folder."""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import shutil
import sys
import tempfile
from importlib import resources

__all__ = ["copy_example", "run_demo"]

#: (what the agent does, the command) — enter, a failing guard, the fix, yield, pause,
#: continue, done. `{key}` is the session key once the session exists.
SCRIPT: tuple[tuple[str, list[str]], ...] = (
    ("The session starts in idle; the agent reads the idle list.", ["session", "new"]),
    (
        "It enters the dev machine for issue GH-12.",
        [
            "fire",
            "--session",
            "{key}",
            "enter",
            "--param",
            "stateMachine=dev",
            "--param",
            "issueId=GH-12",
        ],
    ),
    (
        "It fires planned before writing the plan: the guard fails, PLAN is entered again.",
        ["fire", "--session", "{key}", "planned", "--param", "size=small"],
    ),
    ("It writes the plan.", ["!write", "PLAN.md", "Rename the option `--colour` to `--color`.\n"]),
    ("Now the guard passes.", ["fire", "--session", "{key}", "planned", "--param", "size=small"]),
    (
        "It needs the user's approval, so it yields before ending its turn.",
        [
            "fire",
            "--session",
            "{key}",
            "yield",
            "--param",
            "note=Waiting for the user to approve the plan.",
        ],
    ),
    (
        "The work has to wait for a review: it pauses the issue.",
        ["fire", "--session", "{key}", "pause"],
    ),
    (
        "Later it continues the paused issue.",
        [
            "fire",
            "--session",
            "{key}",
            "enter",
            "--param",
            "stateMachine=dev",
            "--param",
            "issueId=GH-12",
        ],
    ),
    (
        "It makes the change and fires done: the issue completes.",
        ["fire", "--session", "{key}", "done"],
    ),
)


def copy_example(folder: str) -> None:
    """Lay the example project (`.smllm/config.toml`, `.smllm/dev.smllm.yaml`) in `folder`."""
    target = os.path.join(folder, ".smllm")
    os.makedirs(target, exist_ok=True)
    source = resources.files("smllm.examples") / "dev"
    for name in ("config.toml", "dev.smllm.yaml"):
        with open(os.path.join(target, name), "w", encoding="utf-8") as f:
            f.write((source / name).read_text(encoding="utf-8"))


def run_demo(keep: bool = False) -> int:
    from .main import main

    folder = tempfile.mkdtemp(prefix="smllm-demo-")
    old_cwd = os.getcwd()
    saved = {k: os.environ.get(k) for k in ("XDG_STATE_HOME", "XDG_CACHE_HOME", "SMLLM_CONFIG")}
    try:
        copy_example(folder)
        os.environ["XDG_STATE_HOME"] = os.path.join(folder, ".state")
        os.environ["XDG_CACHE_HOME"] = os.path.join(folder, ".cache")
        os.environ.pop("SMLLM_CONFIG", None)
        os.chdir(folder)
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
        print("# Done. The agent was guided state by state; smllm blocked nothing it could skip.")
        return 0
    finally:
        os.chdir(old_cwd)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if keep:
            print(f"# kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
